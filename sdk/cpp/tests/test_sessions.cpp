// The C++ layer replays every session of spec/bridge/ byte for byte (GoogleTest).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

#include "reference.hpp"

#ifndef SPEC_DIR
#error "SPEC_DIR must name spec/bridge"
#endif

static std::string slurp(const std::string& rel) {
    std::ifstream f(std::string(SPEC_DIR) + "/" + rel, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

static std::string replay(const std::string& name, int* status) {
    std::string in = slurp("sessions/" + name + "/to_filter.bin");
    FILE* fin = std::tmpfile();
    FILE* fout = std::tmpfile();
    std::fwrite(in.data(), 1, in.size(), fin);
    std::fflush(fin);
    std::rewind(fin);
    Reference f;
    *status = hb::run_fds(f, fileno(fin), fileno(fout), "00112233445566778899aabbccddeeff", "test");
    long n = lseek(fileno(fout), 0, SEEK_CUR);
    std::string out(static_cast<std::size_t>(n), '\0');
    lseek(fileno(fout), 0, SEEK_SET);
    EXPECT_EQ(read(fileno(fout), out.data(), out.size()), n);
    std::fclose(fin);
    std::fclose(fout);
    return out;
}

TEST(Sessions, UpperMatchesByteForByte) {
    int status = -1;
    std::string out = replay("upper", &status);
    EXPECT_EQ(status, 0);
    EXPECT_EQ(out, slurp("sessions/upper/from_filter.bin"));
}

class Refused : public ::testing::TestWithParam<const char*> {};

TEST_P(Refused, AnswersWithAnErrorAfterItsInitialize) {
    int status = -1;
    std::string name = GetParam();
    std::string out = replay(name, &status);
    std::string prefix = slurp("sessions/" + name + "/from_filter.bin");
    EXPECT_EQ(status, 2);
    ASSERT_GT(out.size(), prefix.size());
    EXPECT_EQ(out.substr(0, prefix.size()), prefix);
    EXPECT_NE(out.find("\"type\":\"ERROR\""), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Vectors, Refused,
                         ::testing::Values("version_mismatch", "record_too_large", "pickle_refused",
                                           "sequence_gap"));
