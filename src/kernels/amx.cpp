// The AMX kernel and its run-time checks (kernels/amx.h). Compiled on every platform; the tile
// code only for x86-64 with GCC or Clang, in functions that carry their own target attributes
// (the rest of the file stays baseline x86-64, so a CPU without AMX never runs an instruction
// it lacks).
#include "kernels/amx.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/line_prefetch.h"
#include "kernels/weight_layout.h"
#include "util/error.h"

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define TROUPE_AMX_KERNEL 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define TROUPE_AMX_KERNEL 0
#endif

namespace troupe::kernels::amx {
namespace {

// ScopedAmx's override: -1 none (the environment decides), 0 off, 1 on.
std::atomic<int> g_override{-1};

#if TROUPE_AMX_KERNEL
bool detect() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid(1, a, b, c, d);
    if (!(c & (1u << 27))) return false;  // OSXSAVE: xgetbv is there
    __cpuid_count(7, 0, a, b, c, d);
    const bool tile = (d >> 24) & 1, int8 = (d >> 25) & 1;
    if (!tile || !int8) return false;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (((lo >> 17) & 3) != 3) return false;  // XTILECFG and XTILEDATA enabled by the OS
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
}
#else
bool detect() {
    return false;
}
#endif

// TROUPE_AMX=0 turns the kernel off (amx.h).
bool env_allows() {
    const char* v = std::getenv("TROUPE_AMX");
    return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace

bool supported() {
    static const bool ok = detect();  // once per process (the permission request included)
    return ok;
}

bool usable() {
    const int o = g_override.load(std::memory_order_relaxed);
    if (o >= 0) return o == 1 && supported();
    static const bool env = env_allows();
    return env && supported();
}

ScopedAmx::ScopedAmx(bool enabled) : saved_(g_override.load()) {
    g_override.store(enabled ? 1 : 0);
}

ScopedAmx::~ScopedAmx() {
    g_override.store(saved_);
}

#if TROUPE_AMX_KERNEL
// GCC 12's _mm512_cvtph_ps and _mm512_cvtepi32_ps pass _mm512_undefined_ps() as the unused
// merge source, which -Wmaybe-uninitialized reports when they are inlined (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {

#define TROUPE_AMX_TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512vl,f16c,fma")))

constexpr size_t kValues = ops::interleaved_value_bytes(DType::Q8_0);  // a block's 512 bytes

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Tiles, M = 2 T rows (token t's block 2p in row 2t, block 2p + 1 in row 2t + 1):
//   tmm0, tmm1  C: M x 16 int32 sums of a pair of blocks (two, so that one pair's dot product
//               runs while the previous pair's sums are stored)
//   tmm2, tmm3  A: M x 64 bytes, the packed activations of a pair
//   tmm4, tmm5  B: 16 x 64 bytes, the values of blocks 2p and 2p + 1 (back to back)
//   tmm6, tmm7  B and A of a lone last block (n_blocks odd): 8 x 64 and M x 32 bytes
TileConfig config_for(int T) {
    TileConfig c;
    const uint8_t m = uint8_t(2 * T);
    for (int i : {0, 1, 2, 3}) c.rows[i] = m, c.colsb[i] = 64;
    for (int i : {4, 5}) c.rows[i] = 16, c.colsb[i] = 64;
    c.rows[6] = 8, c.colsb[6] = 64;
    c.rows[7] = m, c.colsb[7] = 32;
    return c;
}

// The A operands of every pair p of blocks: packed[p][2 t + h][64], h = 0: token t's 32 values
// of block 2p then 32 zeros; h = 1: 32 zeros then its values of block 2p + 1 (zeros when past
// the last block). One tile dot product then gives row 2t block 2p's sums and row 2t + 1
// block 2p + 1's, each exact.
TROUPE_AMX_TARGET void pack_rows(const uint8_t* act, size_t row_bytes, int T, int64_t n,
                                 uint8_t* packed) {
    const __m256i z = _mm256_setzero_si256();
    for (int64_t p = 0; p < (n + 1) / 2; ++p)
        for (int t = 0; t < T; ++t) {
            const uint8_t* x = act + size_t(t) * row_bytes + size_t(p) * 64;
            uint8_t* r = packed + (size_t(p) * size_t(2 * T) + size_t(2 * t)) * 64;
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(r),
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + 32), z);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + 64), z);
            _mm256_storeu_si256(
                reinterpret_cast<__m256i*>(r + 96),
                2 * p + 1 < n ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32)) : z);
        }
}

// acc[t] = fma(float(sums[2t + h]), dw * dx[t], acc[t]) for block k = 2p + h: dw the 16
// rows' f16 scales at `scales`, dx token t's float scale of block k.
template <int T>
TROUPE_AMX_TARGET inline void scale_block(const int32_t (*sums)[16], int h, const uint8_t* scales,
                                          const uint8_t* act, size_t row_bytes, size_t at_d,
                                          __m512* acc) {
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
        float dx;
        std::memcpy(&dx, act + size_t(t) * row_bytes + at_d, 4);
        const __m512 is = _mm512_cvtepi32_ps(_mm512_load_si512(sums[2 * t + h]));
        acc[t] = _mm512_fmadd_ps(is, _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[t]);
    }
}

// Requests the lines from pf up to `to` into L2 (prefetch_stream) and leaves pf there (or
// just past it): in steady state a step's 1 KiB, 16 lines without a bound check each.
inline void prefetch_up_to(const uint8_t*& pf, const uint8_t* to) {
    while (to - pf >= 1024) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) prefetch_stream(pf + 64 * i);
        pf += 1024;
    }
    for (; pf < to; pf += 64) prefetch_stream(pf);
}

// Stored sums are read kLag pairs after their TILESTORED, from a ring of kRing slots: a
// vector load of a tile store's bytes waits until the store has left the core, so reading
// them at once would serialise the tile unit and the scaling.
constexpr int kRing = 4, kLag = 2;
static_assert(kLag < kRing);

// The pairs of groups [g0, g1) run as one sequence s = 0 .. S, P pairs a group. Step s issues
// pair s's dot product (pair p_i of group g_i) into tile C (A, B: its operands; a lone last
// block uses tmm7 and tmm6), stores pair s - 1's sums (tile Cprev) to its ring slot, and
// scales pair s - 1 - kLag's sums (pair p_e of group g_e) into the accumulators, which go to
// y after a group's last pair. The counters advance by one each step (no divisions).
#define TROUPE_AMX_STEP(C, A, B, Cprev)                                                \
    do {                                                                               \
        if (s < S) {                                                                   \
            const uint8_t* vals = base + size_t(g_i) * group_bytes +                   \
                                  ops::interleaved_values_at(DType::Q8_0, n, 2 * p_i); \
            const uint8_t* want = vals + 2 * kValues + kStreamPrefetchBytes;           \
            prefetch_up_to(pf, want < pf_end ? want : pf_end);                         \
            const uint8_t* a = packed + size_t(p_i) * size_t(2 * T) * 64;              \
            _tile_zero(C);                                                             \
            if (!kOdd || 2 * p_i + 1 < n) {                                            \
                _tile_loadd(A, a, 64);                                                 \
                _tile_loadd(B, vals, 64);                                              \
                _tile_dpbssd(C, A, B);                                                 \
            } else {                                                                   \
                _tile_loadd(7, a, 64);                                                 \
                _tile_loadd(6, vals, 64);                                              \
                _tile_dpbssd(C, 7, 6);                                                 \
            }                                                                          \
            if (++p_i == P) p_i = 0, ++g_i;                                            \
        }                                                                              \
        if (s >= 1 && s <= S) _tile_stored(Cprev, ring[(s - 1) % kRing], 64);          \
        if (s - 1 - kLag >= 0 && s - 1 - kLag < S) {                                   \
            const uint8_t* grp = base + size_t(g_e) * group_bytes;                     \
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; ++h) {                      \
                if (kOdd && 2 * p_e + h >= n) break;                                   \
                const int64_t k = 2 * p_e + h;                                         \
                scale_block<T>(ring[(s - 1 - kLag) % kRing], h,                        \
                               grp + ops::interleaved_scales_at(k), act, l.row_bytes,  \
                               l.scale_offset + size_t(k) * 4, acc);                   \
            }                                                                          \
            if (++p_e == P) {                                                          \
                float* yg = y + g_e * ops::kInterleaveRows;                            \
                _Pragma("GCC unroll 8") for (int t = 0; t < T; ++t) {                  \
                    _mm512_storeu_ps(yg + t * ldy, acc[t]);                            \
                    acc[t] = _mm512_setzero_ps();                                      \
                }                                                                      \
                p_e = 0, ++g_e;                                                        \
            }                                                                          \
        }                                                                              \
    } while (0)

// kOdd: n_blocks is odd (the last pair of a group is a lone block).
template <int T, bool kOdd>
TROUPE_AMX_TARGET void groups_t(const uint8_t* w_data, size_t group_bytes, int64_t g0, int64_t g1,
                                const uint8_t* act, const ops::ActLayout& l, float* y, int64_t ldy,
                                const uint8_t* packed, const uint8_t*& pf_io,
                                const uint8_t* pf_end) {
    alignas(64) int32_t ring[kRing][16][16];  // [slot][2 token + h][row]
    const int64_t n = l.n_blocks, P = (n + 1) / 2, S = (g1 - g0) * P;
    const uint8_t* base = w_data + size_t(g0) * group_bytes;
    const uint8_t* pf = pf_io;
    int64_t g_i = 0, p_i = 0, g_e = 0, p_e = 0;  // groups relative to g0
    __m512 acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t s = 0; s <= S + kLag; ++s) {  // two steps: the tiles' numbers are literals
        TROUPE_AMX_STEP(0, 2, 4, 1);
        if (++s > S + kLag) break;
        TROUPE_AMX_STEP(1, 3, 5, 0);
    }
    pf_io = pf;
}
#undef TROUPE_AMX_STEP

TROUPE_AMX_TARGET void load_config(const TileConfig& c) {
    _tile_loadconfig(&c);
}

TROUPE_AMX_TARGET void release() {
    _tile_release();
}

}  // namespace

size_t scratch_bytes(int64_t n_blocks) {
    return size_t((n_blocks + 1) / 2) * size_t(2 * kMaxTokens) * 64;
}

void pack(const uint8_t* act, const ops::ActLayout& l, int T, uint8_t* scratch) {
    TROUPE_CHECK(T >= 1 && T <= kMaxTokens && l.type == DType::Q8_0 && l.n_blocks >= 1);
    pack_rows(act, l.row_bytes, T, l.n_blocks, scratch);
}

void gemv_q8_0_groups(const uint8_t* w_data, size_t group_bytes, int64_t g0, int64_t g1,
                      const uint8_t* act, const ops::ActLayout& l, int T, float* y, int64_t ldy,
                      const uint8_t* packed, const uint8_t*& pf, const uint8_t* pf_end) {
    TROUPE_CHECK(T >= 1 && T <= kMaxTokens && l.type == DType::Q8_0 && l.n_blocks >= 1 &&
                 group_bytes == size_t(l.n_blocks) * ops::interleaved_block_bytes(DType::Q8_0));
    if (g0 >= g1) return;
    const TileConfig c = config_for(T);
    load_config(c);  // per call: the tile configuration is per thread
    switch (T) {
#define TROUPE_AMX_CASE(n)                                                                       \
    case n:                                                                                      \
        if (l.n_blocks % 2 != 0)                                                                 \
            groups_t<n, true>(w_data, group_bytes, g0, g1, act, l, y, ldy, packed, pf, pf_end);  \
        else                                                                                     \
            groups_t<n, false>(w_data, group_bytes, g0, g1, act, l, y, ldy, packed, pf, pf_end); \
        break;
        TROUPE_AMX_CASE(1)
        TROUPE_AMX_CASE(2)
        TROUPE_AMX_CASE(3)
        TROUPE_AMX_CASE(4)
        TROUPE_AMX_CASE(5)
        TROUPE_AMX_CASE(6)
        TROUPE_AMX_CASE(7)
        TROUPE_AMX_CASE(8)
#undef TROUPE_AMX_CASE
        default:
            break;
    }
    release();  // the thread's tile state back to its initial (unsaved) form
}

#else  // no AMX kernel on this platform

size_t scratch_bytes(int64_t) {
    return 0;
}

void pack(const uint8_t*, const ops::ActLayout&, int, uint8_t*) {
    TROUPE_CHECK(false);  // usable() is false here
}

void gemv_q8_0_groups(const uint8_t*, size_t, int64_t, int64_t, const uint8_t*,
                      const ops::ActLayout&, int, float*, int64_t, const uint8_t*, const uint8_t*&,
                      const uint8_t*) {
    TROUPE_CHECK(false);  // usable() is false here
}

#endif

}  // namespace troupe::kernels::amx
