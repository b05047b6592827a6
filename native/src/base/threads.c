#include <pthread.h>
#include "threads.h"

int mpic_start_detached(void *(*fn)(void *), void *arg) {
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  return err;
}
