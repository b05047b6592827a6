/* A Python launcher built as a non-PIE executable whose own code takes malloc's address, as
   Ubuntu's and Debian's /usr/bin/python3 are: the linker then makes the executable's PLT entry
   the address of `malloc` for the whole process (a "canonical PLT entry"). */
#include <stdio.h>
#include <stdlib.h>

int Py_BytesMain(int argc, char **argv);

void *(*volatile taken_malloc)(size_t);

int main(int argc, char **argv) {
    taken_malloc = malloc;  /* an absolute address in non-PIC code: the canonical PLT entry */
    return Py_BytesMain(argc, argv);
}
