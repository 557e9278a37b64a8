// Heddle bridge SDK for C++: a header-only layer over the C SDK (sdk/c). Derive from
// heddle::bridge::Filter, override process (and init / finalize), call run:
//
//     struct Upper : heddle::bridge::Filter {
//         void process(const heddle::bridge::Record& r, heddle::bridge::Emitter& out) override {
//             std::string s(r.text());
//             for (auto& c : s) c = std::toupper(c);
//             out.text(s, r.key());
//         }
//     };
//     int main() { Upper f; return heddle::bridge::run(f); }
//
// An exception thrown by a callback ends the bridge with an ERROR carrying what() (PROCESS
// with the record's number, INIT or FINALIZE).
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "heddle_bridge.h"

namespace heddle::bridge {

/// Record codecs (spec/wire.md §5).
enum class Codec : std::uint8_t {
    Raw = HB_RAW, Utf8 = HB_UTF8, ArrowIpc = HB_ARROW_IPC, Json = HB_JSON,
    U8 = HB_U8, I8 = HB_I8, U16 = HB_U16, I16 = HB_I16, U32 = HB_U32, I32 = HB_I32,
    U64 = HB_U64, I64 = HB_I64, F32 = HB_F32, F64 = HB_F64,
};

template <class T> constexpr Codec codec_of();
template <> constexpr Codec codec_of<std::uint8_t>() { return Codec::U8; }
template <> constexpr Codec codec_of<std::int8_t>() { return Codec::I8; }
template <> constexpr Codec codec_of<std::uint16_t>() { return Codec::U16; }
template <> constexpr Codec codec_of<std::int16_t>() { return Codec::I16; }
template <> constexpr Codec codec_of<std::uint32_t>() { return Codec::U32; }
template <> constexpr Codec codec_of<std::int32_t>() { return Codec::I32; }
template <> constexpr Codec codec_of<std::uint64_t>() { return Codec::U64; }
template <> constexpr Codec codec_of<std::int64_t>() { return Codec::I64; }
template <> constexpr Codec codec_of<float>() { return Codec::F32; }
template <> constexpr Codec codec_of<double>() { return Codec::F64; }

/// One input record; its views are valid during the call that received it.
class Record {
  public:
    explicit Record(const hb_record& r) : r_(r) {}
    Codec codec() const { return static_cast<Codec>(r_.codec); }
    std::uint64_t seq() const { return r_.seq; }
    std::string_view key() const { return {reinterpret_cast<const char*>(r_.key), r_.key_len}; }
    std::span<const std::uint8_t> bytes() const { return {r_.data, r_.len}; }
    std::string_view text() const { return {reinterpret_cast<const char*>(r_.data), r_.len}; }
    /// The elements of an array record of type T (no copy; the SDK aligns payloads).
    template <class T> std::span<const T> values() const {
        if (codec() != codec_of<T>()) throw std::invalid_argument("record is not an array of that type");
        return {reinterpret_cast<const T*>(r_.data), r_.len / sizeof(T)};
    }

  private:
    const hb_record& r_;
};

/// Sends results; each call throws std::runtime_error if the channel fails.
class Emitter {
  public:
    explicit Emitter(hb_session* s) : s_(s) {}
    void emit(Codec c, const void* data, std::size_t len, std::string_view key = {}) {
        if (hb_emit(s_, static_cast<std::uint8_t>(c), data, len, key.data(), key.size()) != 0)
            throw std::runtime_error(hb_error(s_));
    }
    void text(std::string_view t, std::string_view key = {}) { emit(Codec::Utf8, t.data(), t.size(), key); }
    void bytes(std::span<const std::uint8_t> b, std::string_view key = {}) {
        emit(Codec::Raw, b.data(), b.size(), key);
    }
    template <class T> void values(std::span<const T> v, std::string_view key = {}) {
        emit(codec_of<T>(), v.data(), v.size_bytes(), key);
    }

  private:
    hb_session* s_;
};

/// Where the task runs.
struct Context {
    std::string task;
    std::uint32_t instance = 0;
    std::uint32_t parallelism = 1;
};

/// A DataCutter filter.
class Filter {
  public:
    virtual ~Filter() = default;
    virtual void init(const std::vector<std::string>& args, const Context& ctx) {
        (void)args;
        (void)ctx;
    }
    virtual void process(const Record& record, Emitter& out) = 0;
    virtual void finalize(Emitter& out) { (void)out; }
};

namespace detail {
template <class F> int guard(hb_session* s, F&& f) {
    try {
        f();
        return 0;
    } catch (const std::exception& e) {
        hb_fail(s, "%s", e.what());
    } catch (...) {
        hb_fail(s, "an unknown C++ exception");
    }
    return -1;
}

inline hb_filter make(Filter& f) {
    hb_filter c{};
    c.user = &f;
    c.init = [](void* u, int argc, const char* const* argv, const hb_context* ctx, hb_session* s) {
        return guard(s, [&] {
            std::vector<std::string> args(argv, argv + argc);
            static_cast<Filter*>(u)->init(args, Context{ctx->task, ctx->instance, ctx->parallelism});
        });
    };
    c.process = [](void* u, const hb_record* r, hb_session* s) {
        return guard(s, [&] {
            Emitter out(s);
            static_cast<Filter*>(u)->process(Record(*r), out);
        });
    };
    c.finalize = [](void* u, hb_session* s) {
        return guard(s, [&] {
            Emitter out(s);
            static_cast<Filter*>(u)->finalize(out);
        });
    };
    return c;
}
}  // namespace detail

/// Runs `f` as the bridged process Heddle started; returns the exit status for main().
inline int run(Filter& f) {
    hb_filter c = detail::make(f);
    return hb_run(&c);
}

/// Runs one session over two descriptors (tests, embedding).
inline int run_fds(Filter& f, int read_fd, int write_fd, const char* token, const char* language) {
    hb_filter c = detail::make(f);
    return hb_run_fds(read_fd, write_fd, token, language, &c);
}

}  // namespace heddle::bridge
