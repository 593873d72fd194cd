// Edge coverage and comparison tracing of a gcc-built parse core for libFuzzer (atheris).
//
// gcc has no -fsanitize=fuzzer and no inline 8-bit counters, but it has
// -fsanitize-coverage=trace-pc (a call to __sanitizer_cov_trace_pc in every basic block) and
// trace-cmp (__sanitizer_cov_trace_cmp*/switch before every comparison). libFuzzer's own
// trace_pc is a no-op; this shim, linked into the instrumented core only, counts each block
// (hashed by its address within the core) in an 8-bit counter array it registers with
// libFuzzer, and forwards the comparisons to libFuzzer's handlers (its value profile). Atheris
// loads libFuzzer RTLD_LOCAL, so its entry points are found with dlsym on its module, whose path
// the harness passes in EVENTDEDUP_FUZZ_LIBFUZZER before the core is imported. Compiled without
// instrumentation (fuzz/build_core.py).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#define COUNTERS (1u << 16)

static uint8_t counters[COUNTERS];
static uintptr_t base;

typedef void (*counters_init_fn)(uint8_t*, uint8_t*);
typedef void (*cmp1_fn)(uint8_t, uint8_t);
typedef void (*cmp2_fn)(uint16_t, uint16_t);
typedef void (*cmp4_fn)(uint32_t, uint32_t);
typedef void (*cmp8_fn)(uint64_t, uint64_t);
typedef void (*switch_fn)(uint64_t, uint64_t*);

static cmp1_fn cmp1, const_cmp1;
static cmp2_fn cmp2, const_cmp2;
static cmp4_fn cmp4, const_cmp4;
static cmp8_fn cmp8, const_cmp8;
static switch_fn trace_switch;

__attribute__((visibility("hidden"))) void __sanitizer_cov_trace_pc(void) {
    uintptr_t pc = (uintptr_t)__builtin_return_address(0) - base;
    uint8_t* counter = &counters[(pc ^ (pc >> 16)) & (COUNTERS - 1)];
    if (*counter != 0xFF) ++*counter;
}

#define FORWARD(name, fn, type) \
    __attribute__((visibility("hidden"))) void name(type a, type b) { if (fn) fn(a, b); }
FORWARD(__sanitizer_cov_trace_cmp1, cmp1, uint8_t)
FORWARD(__sanitizer_cov_trace_cmp2, cmp2, uint16_t)
FORWARD(__sanitizer_cov_trace_cmp4, cmp4, uint32_t)
FORWARD(__sanitizer_cov_trace_cmp8, cmp8, uint64_t)
FORWARD(__sanitizer_cov_trace_const_cmp1, const_cmp1, uint8_t)
FORWARD(__sanitizer_cov_trace_const_cmp2, const_cmp2, uint16_t)
FORWARD(__sanitizer_cov_trace_const_cmp4, const_cmp4, uint32_t)
FORWARD(__sanitizer_cov_trace_const_cmp8, const_cmp8, uint64_t)

// gcc traces floating-point comparisons too; libFuzzer has no handler for them.
__attribute__((visibility("hidden"))) void __sanitizer_cov_trace_cmpf(float a, float b) { (void)a, (void)b; }
__attribute__((visibility("hidden"))) void __sanitizer_cov_trace_cmpd(double a, double b) { (void)a, (void)b; }

__attribute__((visibility("hidden"))) void __sanitizer_cov_trace_switch(uint64_t value, uint64_t* cases) {
    if (trace_switch) trace_switch(value, cases);
}

// Called by the harness once libFuzzer runs (atheris loads it, RTLD_LOCAL, when fuzzing starts):
// the counters registered, the comparison handlers found. 1 when libFuzzer was found.
__attribute__((visibility("default"))) int eventdedup_fuzz_register_coverage(const char* libfuzzer_path) {
    Dl_info self;
    if (dladdr((void*)&eventdedup_fuzz_register_coverage, &self)) base = (uintptr_t)self.dli_fbase;
    void* fuzzer = dlopen(libfuzzer_path, RTLD_NOW | RTLD_NOLOAD);
    if (fuzzer == NULL) return 0;
    counters_init_fn init = (counters_init_fn)dlsym(fuzzer, "__sanitizer_cov_8bit_counters_init");
    if (init == NULL) return 0;
    cmp1 = (cmp1_fn)dlsym(fuzzer, "__sanitizer_cov_trace_cmp1");
    cmp2 = (cmp2_fn)dlsym(fuzzer, "__sanitizer_cov_trace_cmp2");
    cmp4 = (cmp4_fn)dlsym(fuzzer, "__sanitizer_cov_trace_cmp4");
    cmp8 = (cmp8_fn)dlsym(fuzzer, "__sanitizer_cov_trace_cmp8");
    const_cmp1 = (cmp1_fn)dlsym(fuzzer, "__sanitizer_cov_trace_const_cmp1");
    const_cmp2 = (cmp2_fn)dlsym(fuzzer, "__sanitizer_cov_trace_const_cmp2");
    const_cmp4 = (cmp4_fn)dlsym(fuzzer, "__sanitizer_cov_trace_const_cmp4");
    const_cmp8 = (cmp8_fn)dlsym(fuzzer, "__sanitizer_cov_trace_const_cmp8");
    trace_switch = (switch_fn)dlsym(fuzzer, "__sanitizer_cov_trace_switch");
    init(counters, counters + COUNTERS);
    return 1;
}
