/* The native layer's reading of its settings, alone (tests/package/test_setting_spellings.py): built from
 * native/src/base/settings.c and the generated table, it reads the environment as the wrapper does when
 * loaded and prints what it holds, or the error the wrapper would report. */
#include <stdio.h>
#include "settings.h"

int main(void) {
  mpic_read_settings();
  if (mpic_settings_error[0]) {
    printf("ERROR %s\n", mpic_settings_error);
    return 0;
  }
  printf("thread_level %d\nnode_path %d\nnode_path_collectives %d\nnode_path_min %d\n", mpic_settings.thread_level,
         mpic_settings.node_path, mpic_settings.node_path_collectives, mpic_settings.node_path_min);
  return 0;
}
