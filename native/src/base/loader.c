/* Finding the MPI library and its family. An explicit MPI_COLLECTIVES_LIBMPI
 * is final. Otherwise the sonames of the families searched (all but the
 * standard ABI's, which the mpich wheel installs beside libmpi.so.12 and so
 * is only taken when MPI_COLLECTIVES_ABI=standard asks for it), by these
 * rules, in order; the first library one of the families' records
 * recognizes is bound:
 *   1. a library already loaded in the process (mpi4py's);
 *   2. the launcher's own installation: PREFIX/lib of the program that
 *      started this process (PREFIX/bin/hydra_pmi_proxy, orted, prterun, ...:
 *      mpi_collectives/base/launchers.py), whose library is the one that can join
 *      the processes it started;
 *   3. family by family, the family the launcher's variables ask for first
 *      (Open MPI's mpirun, Hydra, srun --mpi=pmi2 or pmix), each looked for
 *      on LD_LIBRARY_PATH (a loaded module), then under the prefixes where a
 *      wheel may have put it, then by the loader's own search.
 * What was chosen, by which rule, and which other libraries were there is
 * kept for `python -m mpi_collectives info` (mpic_load_rule, mpic_passed_over). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common.h"
#include "family.h"
#include "launcher_abort.h"
#include "launcher_env.h"
#include "loader.h"
#include "log.h"
#include "settings.h"

#include "functions.inc"

const struct mpic_family *mpic_family = NULL;
int mpic_family_id = MPIC_FAMILY_NONE;
char mpic_loaded_path[4096];
char mpic_search_report[8192];
char mpic_missing[4096];
char mpic_family_reason[512];
char mpic_load_rule[1024];
char mpic_passed_over[4096];

static void report(const char *fmt, ...) {
  size_t len = strlen(mpic_search_report);
  if (len + 4 >= sizeof mpic_search_report) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(mpic_search_report + len, sizeof mpic_search_report - len, fmt, ap);
  va_end(ap);
}

/* ---- which family a library speaks ---- */
/* The family MPI_COLLECTIVES_ABI names (an MPIC_FAMILY_*), 0 when unset. */
static int forced_family(void) {
  if (mpic_settings.abi < 0) return 0;
  for (size_t i = 0; i < sizeof mpic_families / sizeof *mpic_families; i++)
    if (!strcmp(mpic_families[i]->name, mpic_abi_words[mpic_settings.abi])) return mpic_families[i]->id;
  return 0;
}

static const struct mpic_family *recognize(void *lib) {
  int forced = forced_family();
  for (size_t i = 0; i < sizeof mpic_families / sizeof *mpic_families; i++)
    if (forced > 0 && mpic_families[i]->id == forced) {
      snprintf(mpic_family_reason, sizeof mpic_family_reason, "forced by MPI_COLLECTIVES_ABI=%s",
               mpic_families[i]->name);
      return mpic_families[i];
    }
  if (!dlsym(lib, "MPI_Init_thread")) {
    snprintf(mpic_family_reason, sizeof mpic_family_reason, "the library does not export MPI_Init_thread");
    return NULL;
  }
  for (size_t i = 0; i < sizeof mpic_families / sizeof *mpic_families; i++)
    if (mpic_families[i]->recognizes(lib, mpic_family_reason, sizeof mpic_family_reason))
      return mpic_families[i];
  return NULL;
}

/* ---- binding ----
 * A function the library lacks answers MPI_ERR_UNSUPPORTED_OPERATION (the
 * family's value: constants are set by then), unless its family or the
 * rules below have a stand-in. */
static int unsupported(void) { return MPIABI_ERR_UNSUPPORTED_OPERATION; }
/* MPIX_Query_*_support: 0 ("no GPU support") is the only honest answer, as
 * non-zero means "supported". */
static int no_gpu_support(void) { return 0; }
/* Open MPI defines these two as macros, not functions: address arithmetic. */
static intptr_t aint_add(intptr_t base, intptr_t disp) { return (intptr_t)((uintptr_t)base + (uintptr_t)disp); }
static intptr_t aint_diff(intptr_t a, intptr_t b) { return (intptr_t)((uintptr_t)a - (uintptr_t)b); }

static void *stand_in(const struct mpic_family *family, void *lib, const char *name) {
  if (!strncmp(name, "MPIX_Query_", 11)) return (void *)no_gpu_support;
  if (!strcmp(name, "MPI_Aint_add")) return (void *)aint_add;
  if (!strcmp(name, "MPI_Aint_diff")) return (void *)aint_diff;
  return family->fallback ? family->fallback(lib, name) : NULL;
}

static int bind(const struct mpic_family *family, void *lib) {
  mpic_missing[0] = 0;
  int missing = 0;
  for (size_t i = 0; i < mpic_function_count; i++) {
    const char *name = mpic_function_symbols[i];
    void *f = dlsym(lib, name);
    if (!f) f = stand_in(family, lib, name);
    if (!f) {
      f = (void *)unsupported;
      size_t len = strlen(mpic_missing);
      snprintf(mpic_missing + len, sizeof mpic_missing - len, "%s%s", missing ? " " : "", name);
      missing++;
    }
    family->functions[i] = f;
  }
  return missing;
}

static int try_library(const char *path, int flags) {
  void *lib = dlopen(path, flags);
  if (!lib) {
    if (!(flags & RTLD_NOLOAD)) report("%s: %s; ", path, dlerror());
    return 0;
  }
  const struct mpic_family *family = recognize(lib);
  if (!family) {
    report("%s: %s; ", path, mpic_family_reason);
    dlclose(lib);
    return 0;
  }
  struct link_map *map = NULL;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0])
    snprintf(mpic_loaded_path, sizeof mpic_loaded_path, "%s", map->l_name);
  else
    snprintf(mpic_loaded_path, sizeof mpic_loaded_path, "%s", path);
  int missing = bind(family, lib);
  family->set_constants(lib);
  if (family->activate) family->activate(lib, mpic_loaded_path);
  if (missing)
    mpic_log(1, "%s lacks %d functions; they return MPI_ERR_UNSUPPORTED_OPERATION: %s", mpic_loaded_path,
             missing, mpic_missing);
  mpic_family = family;
  mpic_family_id = family->id;
  mpic_log(1, "loaded %s (%s)", mpic_loaded_path, mpic_family_reason);
  return 1;
}

/* The families looked for: the forced one, or every one searched by default,
 * the MPICH ABI's first (the commonest on clusters, and the bundled default). */
static const struct mpic_family *const search_order[] = {&mpic_family_mpich, &mpic_family_openmpi,
                                                         &mpic_family_standard};
static int searched(const struct mpic_family *f) {
  int forced = forced_family();
  return forced > 0 ? f->id == forced : f->searched_by_default;
}
static const struct mpic_family *family_named(const char *name) {
  for (size_t i = 0; name && i < sizeof search_order / sizeof *search_order; i++)
    if (!strcmp(search_order[i]->name, name)) return search_order[i];
  return NULL;
}

/* Prefixes that hold a lib/ directory where a wheel may have put libmpi: what
 * our Python layer names (sys.prefix, ...), our own installation prefix, that
 * of every Python package already loaded in the process (jaxlib: found
 * through its .../lib/pythonX.Y/site-packages path), the usual variables. */
struct prefixes {
  char dirs[16][1024];
  int n;
};
static void add_prefix(struct prefixes *p, const char *dir, size_t len) {
  if (!dir || !len || p->n >= 16 || len >= sizeof p->dirs[0]) return;
  for (int i = 0; i < p->n; i++)
    if (strlen(p->dirs[i]) == len && !strncmp(p->dirs[i], dir, len)) return;
  memcpy(p->dirs[p->n], dir, len);
  p->dirs[p->n][len] = 0;
  p->n++;
}
static int collect_prefix(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  const char *name = info->dlpi_name;
  const char *sp = name ? strstr(name, "/site-packages/") : NULL;
  if (!sp) return 0;
  const char *lib = sp;
  while (lib > name && !(lib[0] == '/' && !strncmp(lib, "/lib/python", 11))) lib--;
  if (lib > name) add_prefix(data, name, (size_t)(lib - name));
  return 0;
}
static void collect_prefixes(struct prefixes *prefixes) {
  const char *hint = mpic_settings.prefixes;
  while (hint && *hint) {
    const char *end = strchr(hint, ':');
    size_t len = end ? (size_t)(end - hint) : strlen(hint);
    add_prefix(prefixes, hint, len);
    hint = end ? end + 1 : NULL;
  }
  Dl_info self;
  if (dladdr((void *)collect_prefixes, &self) && self.dli_fname) {
    const char *sp = strstr(self.dli_fname, "/lib/python");
    if (sp) add_prefix(prefixes, self.dli_fname, (size_t)(sp - self.dli_fname));
  }
  dl_iterate_phdr(collect_prefix, prefixes);
  const char *vars[] = {"VIRTUAL_ENV", "CONDA_PREFIX"};
  for (size_t i = 0; i < 2; i++) {
    const char *v = getenv(vars[i]);
    if (v) add_prefix(prefixes, v, strlen(v));
  }
  const char *home = getenv("HOME");
  char local[1024];
  if (home) {
    snprintf(local, sizeof local, "%s/.local", home);
    add_prefix(prefixes, local, strlen(local));
  }
  add_prefix(prefixes, "/usr/local", strlen("/usr/local"));
}

/* ---- the search ---- */
/* The lib folders of an installation prefix: lib, lib64, and Debian's
 * multiarch folder (/usr/lib/x86_64-linux-gnu). */
static int install_dirs(const char *prefix, char dirs[3][1100]) {
#if defined(__x86_64__)
  const char *triplet = "x86_64-linux-gnu";
#elif defined(__aarch64__)
  const char *triplet = "aarch64-linux-gnu";
#else
  const char *triplet = NULL;
#endif
  snprintf(dirs[0], sizeof dirs[0], "%s/lib", prefix);
  snprintf(dirs[1], sizeof dirs[1], "%s/lib64", prefix);
  if (!triplet) return 2;
  snprintf(dirs[2], sizeof dirs[2], "%s/lib/%s", prefix, triplet);
  return 3;
}

/* DIR/NAME for each of the family's sonames that exists there; the first
 * that loads wins. */
static int try_in_dir(const struct mpic_family *f, const char *dir, const char *rule) {
  for (size_t j = 0; f->library_names[j]; j++) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, f->library_names[j]);
    if (access(path, F_OK) != 0) continue;
    if (try_library(path, RTLD_NOW | RTLD_LOCAL)) {
      snprintf(mpic_load_rule, sizeof mpic_load_rule, "%s", rule);
      return 1;
    }
  }
  return 0;
}

/* Rule 2: the installation of the program that started this process. */
static int try_launcher_installation(void) {
  char exe[1024];
  const struct mpic_launcher_program *program = mpic_launcher_program(exe, sizeof exe);
  const struct mpic_family *f = program ? family_named(program->family) : NULL;
  if (!f || !searched(f)) return 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return 0;
  *slash = 0; /* PREFIX/bin */
  slash = strrchr(exe, '/');
  if (!slash) return 0;
  char prefix[1024], rule[1200], dirs[3][1100];
  snprintf(prefix, sizeof prefix, "%.*s", (int)(slash - exe), exe);
  snprintf(rule, sizeof rule, "the installation of the launcher that started this process (%s/bin/%s)",
           prefix, program->program);
  for (int i = 0, n = install_dirs(prefix, dirs); i < n; i++)
    if (try_in_dir(f, dirs[i], rule)) return 1;
  return 0;
}

/* Rule 3 for one family: LD_LIBRARY_PATH, the wheels' prefixes, the loader. */
static int try_family(const struct mpic_family *f, const struct prefixes *prefixes, const char *why) {
  char rule[1400];
  const char *path = getenv("LD_LIBRARY_PATH");
  while (path && *path) {
    const char *end = strchr(path, ':');
    char dir[1024];
    snprintf(dir, sizeof dir, "%.*s", (int)(end ? end - path : (long)strlen(path)), path);
    snprintf(rule, sizeof rule, "%sLD_LIBRARY_PATH (%s)", why, dir);
    if (*dir && try_in_dir(f, dir, rule)) return 1;
    path = end ? end + 1 : NULL;
  }
  for (int i = 0; i < prefixes->n; i++) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/lib", prefixes->dirs[i]);
    snprintf(rule, sizeof rule, "%sthe prefix of a Python environment (%s)", why, prefixes->dirs[i]);
    if (try_in_dir(f, dir, rule)) return 1;
  }
  size_t mark = strlen(mpic_search_report); /* a soname the loader does not know is no news */
  for (size_t j = 0; f->library_names[j]; j++)
    if (try_library(f->library_names[j], RTLD_NOW | RTLD_LOCAL)) {
      snprintf(mpic_load_rule, sizeof mpic_load_rule, "%sthe loader's own search (its cache, system folders)", why);
      return 1;
    }
  mpic_search_report[mark] = 0;
  return 0;
}

/* Every other library the rules could have taken, and why it was not. */
static void note_passed_over(const struct prefixes *prefixes, const char *launcher_family) {
  char chosen[4096];
  if (!realpath(mpic_loaded_path, chosen)) snprintf(chosen, sizeof chosen, "%s", mpic_loaded_path);
  char dirs[24][1100];
  int n = 0;
  const char *path = getenv("LD_LIBRARY_PATH");
  while (path && *path && n < 8) {
    const char *end = strchr(path, ':');
    snprintf(dirs[n], sizeof dirs[n], "%.*s", (int)(end ? end - path : (long)strlen(path)), path);
    if (*dirs[n]) n++;
    path = end ? end + 1 : NULL;
  }
  for (int i = 0; i < prefixes->n && n < 24; i++) snprintf(dirs[n++], sizeof dirs[0], "%s/lib", prefixes->dirs[i]);
  size_t used = 0;
  for (size_t k = 0; k < sizeof search_order / sizeof *search_order; k++) {
    const struct mpic_family *f = search_order[k];
    if (!searched(f)) continue;
    for (int d = 0; d < n; d++)
      for (size_t j = 0; f->library_names[j]; j++) {
        char candidate[1200], real[4096];
        snprintf(candidate, sizeof candidate, "%s/%s", dirs[d], f->library_names[j]);
        if (!realpath(candidate, real) || !strcmp(real, chosen) || strstr(mpic_passed_over, candidate)) continue;
        const char *why = launcher_family && strcmp(f->name, launcher_family) ? "not the launcher's MPI"
                                                                              : "found by a later rule";
        used += (size_t)snprintf(mpic_passed_over + used, used < sizeof mpic_passed_over ? sizeof mpic_passed_over - used : 0,
                                 "%s%s (%s: %s)", used ? "; " : "", candidate, f->name, why);
        if (used >= sizeof mpic_passed_over) return;
      }
  }
}

void mpic_load(void) {
  if (mpic_settings_error[0]) {
    report("%s", mpic_settings_error);
    return;
  }
  if (mpic_settings.libmpi) {
    /* An explicit choice is final: falling back to another MPI would hide the mistake. */
    if (!try_library(mpic_settings.libmpi, RTLD_NOW | RTLD_LOCAL))
      report("(MPI_COLLECTIVES_LIBMPI=%s) ", mpic_settings.libmpi);
    else
      snprintf(mpic_load_rule, sizeof mpic_load_rule, "MPI_COLLECTIVES_LIBMPI");
    return;
  }
  /* 1. Already loaded. */
  for (size_t k = 0; k < sizeof search_order / sizeof *search_order; k++)
    for (size_t j = 0; searched(search_order[k]) && search_order[k]->library_names[j]; j++)
      if (try_library(search_order[k]->library_names[j], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
        snprintf(mpic_load_rule, sizeof mpic_load_rule, "already loaded in this process");
        return;
      }
  struct prefixes prefixes = {.n = 0};
  collect_prefixes(&prefixes);
  const char *launcher_family = mpic_launcher_family();
  /* 2. The launcher's installation. 3. Family by family, the launcher's first. */
  int found = try_launcher_installation();
  const struct mpic_family *first = family_named(launcher_family);
  if (!found && first && searched(first)) {
    char why[128];
    snprintf(why, sizeof why, "the launcher's MPI family (%s), on ", first->name);
    found = try_family(first, &prefixes, why);
  }
  for (size_t k = 0; !found && k < sizeof search_order / sizeof *search_order; k++)
    if (searched(search_order[k]) && search_order[k] != first)
      found = try_family(search_order[k], &prefixes, "the first found, on ");
  if (found) {
    note_passed_over(&prefixes, launcher_family);
    return;
  }
  report("no ");
  int shown = 0;
  for (size_t k = 0; k < sizeof search_order / sizeof *search_order; k++)
    for (size_t j = 0; searched(search_order[k]) && search_order[k]->library_names[j]; j++)
      report("%s%s", shown++ ? " or " : "", search_order[k]->library_names[j]);
  report(" on LD_LIBRARY_PATH, under %d prefixes (", prefixes.n);
  for (int i = 0; i < prefixes.n; i++) report("%s%s", i ? ", " : "", prefixes.dirs[i]);
  report(") or by the loader's search; ");
}

/* ---- what a process without a library is told ---- */
/* Also for Python (mpi_collectives.base.mpi.not_loaded_message). */
MPIABI_EXPORT const char *mpic_not_loaded_message(void) {
  static char message[sizeof mpic_search_report + 512];
  if (mpic_settings_error[0]) {
    snprintf(message, sizeof message, "the MPI library was not loaded: %s.", mpic_settings_error);
    return message;
  }
  char tried[sizeof mpic_search_report];
  snprintf(tried, sizeof tried, "%s", mpic_search_report[0] ? mpic_search_report : "nothing tried");
  for (size_t n = strlen(tried); n > 0 && (tried[n - 1] == ' ' || tried[n - 1] == ';'); n--) tried[n - 1] = 0;
  snprintf(message, sizeof message,
           "no MPI library could be loaded (%s). Fix: set MPI_COLLECTIVES_LIBMPI to the full path of "
           "your MPI's libmpi.so, or `pip install mpich`.",
           tried);
  return message;
}

/* _exit, because exit() would run JAX's atexit MPI_Finalize and land here again. */
void mpic_not_loaded(const char *function) {
  mpic_terminal_printf("mpi-collectives: %s called, but %s\n", function, mpic_not_loaded_message());
  fflush(stderr); /* (the library's own lines first) */
  mpic_launcher_abort(1); /* the ranks that did load theirs wait in MPI_Init for this one */
  _exit(1);
}
