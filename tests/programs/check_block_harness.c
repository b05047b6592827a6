/* Runs the check's block reduction (native/src/services/check_block.c) on
 * two blocks given on the command line, without MPI, for
 * tests/native/test_check_block.py:
 *
 *     check_block_harness SIG_A CARRY_A HEX_A SIG_B CARRY_B HEX_B
 *
 * CARRY is the carry mode, or MODE@PHASE for a call in a phase of the
 * program (mpic_block_set_phase).
 * A is the library's `in` operand, B its `inout`. Prints "agreed 0|1" and
 * "payload HEX" of the result (all MPIC_BLOCK_PAYLOAD bytes). With
 * CHECK_BLOCK_SMALL=1 in the environment, the small block's reduction
 * (MPIC_BLOCK_SMALL_PAYLOAD bytes of data; the rest of B left as it was). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check_block.h"

static void fill(struct mpic_block *b, const char *sig, const char *carry, const char *hex) {
  mpic_block_start(b, strtoull(sig, NULL, 0), atoi(carry));
  const char *at = strchr(carry, '@');
  if (at) mpic_block_set_phase(b, strtoll(at + 1, NULL, 0));
  size_t n = strlen(hex) / 2;
  for (size_t i = 0; i < n && i < MPIC_BLOCK_PAYLOAD; i++) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    b->payload[i] = (unsigned char)v;
  }
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s SIG_A CARRY_A HEX_A SIG_B CARRY_B HEX_B\n", argv[0]);
    return 2;
  }
  struct mpic_block a, b;
  fill(&a, argv[1], argv[2], argv[3]);
  fill(&b, argv[4], argv[5], argv[6]);
  int one = 1;
  int small = getenv("CHECK_BLOCK_SMALL") && !strcmp(getenv("CHECK_BLOCK_SMALL"), "1");
  if (small)
    mpic_block_reduce_small(&a, &b, &one, NULL);
  else
    mpic_block_reduce(&a, &b, &one, NULL);
  printf("agreed %d\npayload ", mpic_block_agreed(&b));
  for (size_t i = 0; i < (small ? MPIC_BLOCK_SMALL_PAYLOAD : MPIC_BLOCK_PAYLOAD); i++) printf("%02x", b.payload[i]);
  printf("\n");
  return 0;
}
