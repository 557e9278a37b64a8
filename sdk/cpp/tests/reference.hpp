// The reference filter of spec/bridge.md §9, in C++.
#pragma once
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>

#include "heddle/bridge.hpp"

namespace hb = heddle::bridge;

struct Reference : hb::Filter {
    std::string prefix;
    std::uint64_t count = 0;
    long long fail_at = -1;

    void init(const std::vector<std::string>& args, const hb::Context&) override {
        prefix = args.empty() ? "" : args[0];
        fail_at = args.size() > 1 ? std::atoll(args[1].c_str()) : -1;
        count = 0;
    }
    void process(const hb::Record& r, hb::Emitter& out) override {
        if (static_cast<long long>(count) == fail_at)
            throw std::runtime_error("asked to fail at record " + std::to_string(count));
        ++count;
        if (r.codec() == hb::Codec::Utf8) {
            std::string s(r.text());
            for (auto& c : s)
                if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
            out.text(s, r.key());
        } else if (r.codec() == hb::Codec::F64) {
            auto v = r.values<double>();
            double sum = std::accumulate(v.begin(), v.end(), 0.0);
            out.values<double>(std::span<const double>(&sum, 1), r.key());
        } else {
            out.emit(r.codec(), r.bytes().data(), r.bytes().size(), r.key());
        }
    }
    void finalize(hb::Emitter& out) override { out.text(prefix + std::to_string(count)); }
};
