/* The flight record's tickets (native/src/services/flight.c), without MPI:
 * compiled with flight.c alone and the few functions it uses stubbed here
 * (tests/native/test_flight.py). Prints the record after each case. */
#include <stdio.h>
#include <string.h>
#include "flight.h"
#include "settings.h"

struct mpic_settings mpic_settings;

const char *mpic_launcher_where(char *buf, size_t len) {
  snprintf(buf, len, "rank 0/1");
  return buf;
}

/* A signature is its count here: "call x<count>". */
void mpic_describe(uint64_t sig, char *out, size_t len) { snprintf(out, len, "call x%llu", (unsigned long long)sig); }

void mpic_signature_words(uint64_t sig, const char **kind, const char **op, const char **type, long long *count) {
  *kind = "call", *op = "", *type = "t", *count = (long long)sig;
}

int main(void) {
  char text[8192];
  /* 1. A collective, then 32 newer ones take every slot; the first ends late. */
  mpic_ticket first = mpic_flight_begin(1, 1, 1);
  mpic_ticket last = 0;
  for (int i = 2; i <= 33; i++) last = mpic_flight_begin((uint64_t)i, 1, (unsigned)i);
  mpic_flight_end(first);
  mpic_flight_text(text, sizeof text);
  printf("== late end\n%s", text);
  /* 2. The newest ends: it alone is finished. */
  mpic_flight_end(last);
  mpic_flight_text(text, sizeof text);
  printf("== own end\n%s", text);
  /* 3. Ending twice changes nothing; no ticket ends nothing. */
  mpic_flight_end(last);
  mpic_flight_end(MPIC_NO_TICKET);
  uint64_t sig = 0;
  int comm = 0;
  unsigned seq = 0;
  int64_t start = 0;
  int busy = mpic_flight_current(&sig, &comm, &seq, &start);
  printf("== current %d x%llu\n", busy, (unsigned long long)sig);
  return 0;
}
