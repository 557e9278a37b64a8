// The C++ reference filter as a bridged program, for the conformance suite.
#include "reference.hpp"

int main() {
    Reference f;
    return hb::run(f);
}
