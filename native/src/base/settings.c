/* Reading the native layer's settings, once, when it is loaded. The table
 * (which variables, their defaults and what each may be) is generated from
 * mpi_collectives/base/settings.py into generated/settings.h and settings.inc;
 * here is only how one value is read.
 *
 * A value that is not understood is an error, not a guess: the library is
 * then not loaded, and the first MPI call (or initialize()) says which
 * variable, which value, and what it may be (mpic_settings_error).
 *
 * The spellings are Python's (mpi_collectives/base/settings.py says them;
 * tests/package/test_setting_spellings.py runs one table through both): a whole
 * number is ASCII digits with an optional leading minus (leading zeros
 * allowed; no +, blanks or underscores, which strtol alone would take or
 * stop at); a word is one of the words in any case; a list is words joined
 * by commas, none empty; an empty value is the default. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "settings.h"

char mpic_settings_error[512];

static void bad(const char *var, const char *value, const char *allowed) {
  if (!mpic_settings_error[0])
    snprintf(mpic_settings_error, sizeof mpic_settings_error, "%s=%s is not %s. Fix: correct %s or unset it",
             var, value, allowed, var);
}

/* Any text; unset or empty leaves the default. */
static void read_text(const char *var, const char **out) {
  const char *v = getenv(var);
  if (v && *v) *out = v;
}

/* One of `words` (NULL-terminated), in any case: *out becomes its index. */
static void read_words(const char *var, int *out, const char *const *words) {
  const char *v = getenv(var);
  if (!v || !*v) return;
  char allowed[256] = "one of ";
  for (int i = 0; words[i]; i++) {
    if (!strcasecmp(v, words[i])) {
      *out = i;
      return;
    }
    size_t len = strlen(allowed);
    snprintf(allowed + len, sizeof allowed - len, "%s%s", i ? ", " : "", words[i]);
  }
  bad(var, v, allowed);
}

/* A comma-separated list of some of `words` (NULL-terminated), in any case:
 * *out gets a bit for each word named (bit i for words[i]). */
static void read_some(const char *var, int *out, const char *const *words) {
  const char *v = getenv(var);
  if (!v || !*v) return;
  int bits = 0;
  for (const char *p = v;;) { /* each word, an empty one too (",," or a comma at either end): refused */
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    int found = -1;
    for (int i = 0; words[i] && found < 0; i++)
      if (strlen(words[i]) == len && !strncasecmp(p, words[i], len)) found = i;
    if (found < 0) {
      char allowed[256] = "a comma-separated list of ";
      for (int i = 0; words[i]; i++) {
        size_t at = strlen(allowed);
        snprintf(allowed + at, sizeof allowed - at, "%s%s", i ? ", " : "", words[i]);
      }
      bad(var, v, allowed);
      return;
    }
    bits |= 1 << found;
    if (!end) break;
    p = end + 1;
  }
  *out = bits;
}

/* A whole number from lo to hi. */
static void read_int(const char *var, int *out, int lo, int hi) {
  const char *v = getenv(var);
  if (!v || !*v) return;
  const char *digits = v + (*v == '-');
  int whole = *digits != 0 && strspn(digits, "0123456789") == strlen(digits) && strlen(digits) <= 18;
  char *end = NULL;
  long long n = whole ? strtoll(v, &end, 10) : 0;
  if (!whole || n < lo || n > hi) {
    char allowed[64];
    snprintf(allowed, sizeof allowed, "a whole number from %d to %d", lo, hi);
    bad(var, v, allowed);
    return;
  }
  *out = (int)n;
}

#include "settings.inc"
