/* The reference filter as a bridged program, for the conformance suite. */
#include "reference.h"

int main(void) {
    hb_filter f = hb_reference_filter();
    return hb_run(&f);
}
