/* lossops' native custom-op library: `RegisterCustomOps`, which any ONNX Runtime host calls through
 * `register_custom_ops_library` (Python), `RegisterCustomOpsLibrary_V2` (C, C++), `registerCustomOpLibrary`
 * (Java), `RegisterCustomOpLibraryV2` (C#) or Triton's `op_library_filename`.
 *
 * It registers every lossops operator for every element type in the domain `lossops`, under the names the
 * models use. What it knows of the operators (inputs, optional flags, attributes, their kinds, allowed values,
 * ranges, defaults and the messages' expectations), of ONNX Runtime's C interface (the OrtApi slots, the
 * OrtCustomOp fields) and of the kernel libraries (levels, files, sizes, CPU flags, stamp) comes from
 * lossops_tables.h, which library.py generates from the operator records and from capi.py,
 * machine_code.py and kernels/layout.py when the wheel is built: nothing here is written a second time by hand.
 *
 * The machine code is not in this file: the first registration chooses the kernel library of the best level
 * this CPU runs (its /proc/cpuinfo flags decide, as in machine_code.py; LOSSOPS_KERNELS may name another it
 * runs), checks its size and SHA-256 digest (as the build recorded them) and then its stamp and level, and loads
 * it. The kernel ORT runs is that library's
 * trampoline, on a state CreateKernelV2 fills exactly as ort_ext/host.py does for Python.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void OrtStatus;
typedef struct {
    const void *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
} OrtApiBase;

struct lossops_attribute {
    const char *name;
    char kind;                    /* 's': STRING, 'i': INT, 'f': FLOAT */
    int param;                    /* the kernel's parameter index; -1: the reduction, a state word of its own */
    int n_allowed;                /* an enum's values; 0: a number in [low, high] */
    const char *const *allowed_s; /* kind 's' */
    const int64_t *allowed_i;     /* kind 'i' */
    const int64_t *codes;         /* kind 's': what the kernel reads for each allowed value */
    double low, high;
    const char *default_s;
    int64_t default_i;
    double default_f;
    /* the refusals, as opset/spec.py words them, this attribute's name and expectation filled in */
    const char *wrong_kind;  /* its value (%s) is of another kind (%s: str, int or float) */
    const char *not_single;  /* it is a list or a tensor (%s: what it is) */
    const char *not_allowed; /* its value (%s) is not allowed */
};

struct lossops_op {
    const char *name;
    int n_inputs;
    const unsigned char *optional;
    const unsigned char *indices; /* per input: class indices (int64) rather than the node's type T */
    int n_attributes;
    const struct lossops_attribute *attributes;
    int n_foreign;
    const char *const *foreign; /* the other operators' attribute names, sorted: the unknown ones it can see */
    const char *unknown;        /* the refusal of an unknown attribute (%s: its name) */
};

struct lossops_level {
    const char *name, *file;
    long long size;
    const char *sha256; /* hex */
    const char *flags;  /* the /proc/cpuinfo flags (CPUINFO_KEY's) it adds to the level before, space-separated */
};

struct lossops_type {
    int elem_type, itemsize;
};

#include "lossops_tables.h"

#if !LOSSOPS_ARCH_MACRO
#error "lossops_tables.h was generated for another architecture"
#endif

/* the wheel's baseline (manylinux_2_17): glibc 2.34 gave these new default versions */
__asm__(".symver dlopen, dlopen@" GLIBC_BASELINE);
__asm__(".symver dlsym, dlsym@" GLIBC_BASELINE);
__asm__(".symver dladdr, dladdr@" GLIBC_BASELINE);
__asm__(".symver dlerror, dlerror@" GLIBC_BASELINE);
__asm__(".symver dlclose, dlclose@" GLIBC_BASELINE);
__asm__(".symver memcpy, memcpy@" GLIBC_BASELINE); /* glibc 2.14 gave x86-64's a new default version */

#define N_OPS (sizeof(OPS) / sizeof(OPS[0]))
#define N_TYPES (sizeof(TYPES) / sizeof(TYPES[0]))
#define N_LEVELS (sizeof(LEVELS) / sizeof(LEVELS[0]))
#define EXPORT __attribute__((visibility("default")))
#define SLOT(api, name) (((void *const *)(api))[SLOT_##name])

typedef OrtStatus *(*create_status_fn)(int code, const char *message);
typedef const char *(*error_message_fn)(const OrtStatus *status);
typedef void (*release_status_fn)(OrtStatus *status);
typedef OrtStatus *(*attribute_float_fn)(const void *info, const char *name, float *out);
typedef OrtStatus *(*attribute_int64_fn)(const void *info, const char *name, int64_t *out);
typedef OrtStatus *(*attribute_string_fn)(const void *info, const char *name, char *out, size_t *size);
typedef OrtStatus *(*attribute_array_fn)(const void *info, const char *name, void *out, size_t *size);
typedef OrtStatus *(*attribute_tensor_fn)(const void *info, const char *name, void *allocator, void **out);
typedef OrtStatus *(*default_allocator_fn)(void **out);
typedef void (*release_value_fn)(void *value);
typedef OrtStatus *(*create_domain_fn)(const char *domain, void **out);
typedef OrtStatus *(*domain_add_fn)(void *domain, const void *op);
typedef OrtStatus *(*add_domain_fn)(void *options, void *domain);

static OrtStatus *status(const void *api, const char *format, ...) {
    char message[2048];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    return ((create_status_fn)SLOT(api, CreateStatus))(ORT_INVALID_ARGUMENT, message);
}

/* --- the kernels: one library, chosen once per process ------------------------------------------------- */

static struct {
    char error[2048];  /* why no library serves, or LOSSOPS_KERNELS=none: nothing is registered */
    const char *level; /* the library's level, once loaded */
    void *trampoline;
    void *compute[N_OPS], *task[N_OPS];
} kernels;

static void note(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fputs("lossops: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
}

/* How many of LEVELS (lowest first) this CPU runs: each adds flags to the one before. */
static size_t cpu_levels(void) {
    static char line[1 << 16], have[sizeof line + 2]; /* called once, under `lock` */
    snprintf(have, sizeof have, " ");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    size_t key = strlen(CPUINFO_KEY);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, CPUINFO_KEY, key) == 0 && strchr(" \t:", line[key]) && strchr(line, ':')) {
            strcat(have, strchr(line, ':') + 1);
            break;
        }
    fclose(f);
    for (char *c = have; *c; c++)
        if (*c == '\n' || *c == '\t') *c = ' ';
    strcat(have, " ");
    size_t runs = 0;
    for (; runs < N_LEVELS; runs++) {
        char flags[512], *save = NULL;
        snprintf(flags, sizeof flags, "%s", LEVELS[runs].flags);
        for (char *flag = strtok_r(flags, " ", &save); flag; flag = strtok_r(NULL, " ", &save)) {
            char word[128];
            snprintf(word, sizeof word, " %s ", flag);
            if (!strstr(have, word)) return runs;
        }
    }
    return runs;
}

static const char *my_directory(char *out, size_t n) {
    Dl_info info;
    if (!dladdr((void *)&kernels, &info) || !info.dli_fname) return NULL;
    snprintf(out, n, "%s", info.dli_fname);
    char *slash = strrchr(out, '/');
    if (slash) *slash = '\0'; else snprintf(out, n, ".");
    return out;
}

/* SHA-256 (FIPS 180-4) of `data`, as 64 hex digits into `hex`; SHA256_K and SHA256_H come with the tables. */
#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
static void sha256_block(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++)
        w[i] = w[i - 16] + (ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3)) + w[i - 7] +
               (ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10));
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) + ((e & f) ^ (~e & g)) + SHA256_K[i] + w[i];
        uint32_t t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

static void sha256_hex(const unsigned char *data, size_t n, char hex[65]) {
    uint32_t h[8];
    unsigned char tail[128] = {0};
    memcpy(h, SHA256_H, sizeof h);
    size_t full = n - n % 64, rest = n % 64, blocks = rest < 56 ? 1 : 2;
    for (size_t i = 0; i < full; i += 64) sha256_block(h, data + i);
    memcpy(tail, data + full, rest);
    tail[rest] = 0x80;
    for (int i = 0; i < 8; i++) tail[64 * blocks - 1 - i] = (unsigned char)((uint64_t)n * 8 >> (8 * i));
    for (size_t b = 0; b < blocks; b++) sha256_block(h, tail + 64 * b);
    for (int i = 0; i < 8; i++) snprintf(hex + 8 * i, 9, "%08x", h[i]);
}

/* Load LEVELS[k] into `kernels`; 0, or 1 with the reason in `why` (loader.py's words). Nothing is mapped that is
 * not the file the build wrote, byte for byte (a truncated or damaged library mapped by the loader could end the
 * process at its first call). */
static int load(size_t k, char *why, size_t n) {
    char directory[4096], path[4200];
    const char *level = LEVELS[k].name;
    if (LEVELS[k].size < 0) return snprintf(why, n, SAID_ABSENT, level), 1;
    if (!my_directory(directory, sizeof directory)) return snprintf(why, n, SAID_UNREADABLE, level, "?"), 1;
    snprintf(path, sizeof path, "%s/%s", directory, LEVELS[k].file);
    DIR *folder = opendir(path); /* not fstat: glibc 2.33 gave it its own symbol, past the wheel's baseline */
    if (folder) {
        closedir(folder);
        return snprintf(why, n, SAID_NOT_A_FILE, level, path), 1;
    }
    FILE *file = fopen(path, "rb");
    if (!file) return snprintf(why, n, SAID_UNREADABLE, level, path), 1;
    long long size = fseek(file, 0, SEEK_END) == 0 ? (long long)ftell(file) : -1;
    unsigned char *data = size == LEVELS[k].size ? malloc((size_t)size + 1) : NULL;
    int whole = data && fseek(file, 0, SEEK_SET) == 0 && fread(data, 1, (size_t)size, file) == (size_t)size;
    fclose(file);
    char digest[65] = "";
    if (whole) sha256_hex(data, (size_t)size, digest);
    free(data);
    if (size == LEVELS[k].size && !whole) return snprintf(why, n, SAID_UNREADABLE, level, path), 1;
    if (size != LEVELS[k].size || strcmp(digest, LEVELS[k].sha256) != 0)
        return snprintf(why, n, SAID_DAMAGED, level, path), 1;
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library) return snprintf(why, n, SAID_NO_LOAD, level, dlerror()), 1;
    const char *const *stamp = dlsym(library, "lossops_stamp"), *const *built = dlsym(library, "lossops_level");
    if (!built || strcmp(*built, level) != 0)
        snprintf(why, n, SAID_OTHER_LEVEL, level, built ? *built : "none");
    else if (!stamp || strcmp(*stamp, LOSSOPS_STAMP) != 0)
        snprintf(why, n, SAID_OTHER_SOURCES, level);
    else
        why[0] = '\0';
    if (why[0]) { /* none of its code has run: it goes again */
        dlclose(library);
        return 1;
    }
    kernels.trampoline = dlsym(library, "lossops_trampoline");
    for (size_t i = 0; i < N_OPS; i++) {
        char name[256];
        snprintf(name, sizeof name, "lossops_%s_compute", OPS[i].name);
        kernels.compute[i] = dlsym(library, name);
        snprintf(name, sizeof name, "lossops_%s_task", OPS[i].name);
        kernels.task[i] = dlsym(library, name);
        if (!kernels.compute[i] || !kernels.task[i] || !kernels.trampoline)
            return snprintf(why, n, SAID_NO_LOAD, level, "a symbol is missing"), 1;
    }
    kernels.level = level;
    return 0;
}

/* LOSSOPS_KERNELS without the spaces around it (as Python reads it), into `out`; "" where unset. */
static const char *wanted_level(char *out, size_t n) {
    const char *v = getenv(LOSSOPS_ENV);
    if (!v) v = "";
    while (*v && strchr(" \t\n", *v)) v++;
    snprintf(out, n, "%s", v);
    for (size_t len = strlen(out); len && strchr(" \t\n", out[len - 1]); len--) out[len - 1] = '\0';
    return out;
}

static void quoted(const unsigned char *v, size_t n, char *out, size_t size);

/* The machine code, chosen as loader.py chooses it: the level LOSSOPS_KERNELS names where it serves; else the
 * best level this CPU runs, then each level below it (each refusal said once); where none serves, nothing (the
 * models' functions run), said once. */
static void choose(void) {
    size_t runs = cpu_levels();
    char wanted[256], why[2048] = "", shown[1100], names[512] = "";
    wanted_level(wanted, sizeof wanted);
    if (strcmp(wanted, "none") == 0) {
        snprintf(kernels.error, sizeof kernels.error, "turned off by %s=none", LOSSOPS_ENV);
        return;
    }
    if (wanted[0]) {
        size_t k = 0;
        while (k < N_LEVELS && strcmp(LEVELS[k].name, wanted) != 0) k++;
        for (size_t j = 0; j < N_LEVELS; j++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", j ? ", " : "", LEVELS[j].name);
        quoted((const unsigned char *)wanted, strlen(wanted), shown, sizeof shown);
        if (strcmp(wanted, "jit") == 0)
            note("%s=jit: this library carries compiled kernels and no compiler; choosing as without it",
                 LOSSOPS_ENV);
        else if (k == N_LEVELS)
            note(SAID_OVERRIDE_UNKNOWN, LOSSOPS_ENV, shown, names);
        else if (k >= runs) {
            snprintf(why, sizeof why, SAID_CPU_CANNOT, wanted);
            note(SAID_OVERRIDE_REFUSED, LOSSOPS_ENV, wanted, why);
        } else if (load(k, why, sizeof why))
            note(SAID_OVERRIDE_REFUSED, LOSSOPS_ENV, wanted, why);
        else
            return;
    }
    if (runs == 0) snprintf(why, sizeof why, SAID_NO_LEVEL, LEVELS[0].name);
    size_t tried[N_LEVELS], n = 0;
    for (size_t k = runs; k-- > 0;) /* the best level built first */
        if (LEVELS[k].size >= 0) tried[n++] = k;
    if (runs && !n) snprintf(why, sizeof why, SAID_ABSENT, LEVELS[runs - 1].name);
    for (size_t j = 0; j < n; j++) {
        if (!load(tried[j], why, sizeof why)) return;
        if (j + 1 < n) note(SAID_TRYING, why, LEVELS[tried[j + 1]].name);
    }
    snprintf(kernels.error, sizeof kernels.error, "%s", why);
    note(SAID_DECOMPOSITION, why);
}

/* --- CreateKernelV2: the node's attributes, read and checked as ort_ext/host.py and opset/spec.py do ------ */

struct custom_op {
    lossops_custom_op ort; /* first: ORT hands this address back */
    const struct lossops_op *op;
    size_t index;
    int elem_type, itemsize;
};

/* Python's repr() of a float (the shortest digits that read back, in Python's notation). */
static void repr_float(double v, char *out, size_t n) {
    if (isnan(v)) { snprintf(out, n, "nan"); return; }
    if (isinf(v)) { snprintf(out, n, v < 0 ? "-inf" : "inf"); return; }
    char e[64], digits[32];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    const char *s = e + (e[0] == '-');
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int exponent = atoi(s + 1), at = 0;
    char *o = out;
    if (e[0] == '-') *o++ = '-';
    if (exponent < -4 || exponent >= 16) {
        *o++ = digits[0];
        if (nd > 1) { *o++ = '.'; memcpy(o, digits + 1, nd - 1); o += nd - 1; }
        snprintf(o, n - (o - out), "e%c%02d", exponent < 0 ? '-' : '+', abs(exponent));
        return;
    }
    if (exponent < 0) {
        *o++ = '0'; *o++ = '.';
        for (int i = 0; i < -exponent - 1; i++) *o++ = '0';
        memcpy(o, digits, nd); o += nd;
    } else {
        for (; at <= exponent; at++) *o++ = at < nd ? digits[at] : '0';
        *o++ = '.';
        if (at < nd) { memcpy(o, digits + at, nd - at); o += nd - at; } else *o++ = '0';
    }
    *o = '\0';
}

/* A string attribute's exact bytes as opset/spec.py's `quoted` shows them: quoted as Python quotes a str, printable
 * ASCII as it is, anything else as \xNN; past QUOTED_MOST bytes, the first ones and "...". */
#define QUOTED_MOST QUOTED_BYTES
static void quoted(const unsigned char *v, size_t n, char *out, size_t size) {
    char quote = memchr(v, '\'', n) && !memchr(v, '"', n) ? '"' : '\'';
    size_t k = 0, shown = n < QUOTED_MOST ? n : QUOTED_MOST;
    out[k++] = quote;
    for (size_t i = 0; i < shown && k + 8 < size; i++) {
        unsigned char c = v[i];
        if (c == quote || c == '\\') k += snprintf(out + k, size - k, "\\%c", c);
        else if (c == '\n') k += snprintf(out + k, size - k, "\\n");
        else if (c == '\r') k += snprintf(out + k, size - k, "\\r");
        else if (c == '\t') k += snprintf(out + k, size - k, "\\t");
        else if (c < 0x20 || c >= 0x7f) k += snprintf(out + k, size - k, "\\x%02x", c);
        else out[k++] = (char)c;
    }
    snprintf(out + k, size - k, "%c%s", quote, n > QUOTED_MOST ? "..." : "");
}

struct value {
    char kind; /* 's', 'i', 'f'; 'n': present but not a single str, int or float; 0: absent */
    unsigned char *bytes; /* kind 's': the exact bytes (malloc'd; NUL-terminated past `n`) */
    size_t n;
    int64_t i;
    double f;
    const char *phrase; /* kind 'n': what it is */
};

static OrtStatus *copied(const void *api, OrtStatus *failed) {
    OrtStatus *out = status(api, "%s", ((error_message_fn)SLOT(api, GetErrorMessage))(failed));
    ((release_status_fn)SLOT(api, ReleaseStatus))(failed);
    return out;
}

/* Whether a getter's failure says the node has no such attribute (rather than one of another type): ONNX Runtime
 * words the two apart ("No attribute with name:'x'is defined." / "Attribute name and type don't match"), and
 * this is the only way its C API tells them apart. Releases the status. */
static int absent(const void *api, OrtStatus *failed) {
    int none = strncmp(((error_message_fn)SLOT(api, GetErrorMessage))(failed), "No attribute with name", 22) == 0;
    ((release_status_fn)SLOT(api, ReleaseStatus))(failed);
    return none;
}

/* The node's attribute `name` as the type it has (KernelInfo can only be asked for a name and a type): a string's
 * exact bytes (a NUL inside, bytes that are not UTF-8 text: all kept), an int, a float, or what else it is. */
static OrtStatus *read_attribute(const void *api, const void *info, const char *name, struct value *v) {
    memset(v, 0, sizeof *v);
    attribute_string_fn get_string = (attribute_string_fn)SLOT(api, KernelInfoGetAttribute_string);
    size_t size = 0;
    OrtStatus *failed = get_string(info, name, NULL, &size);
    if (!failed) {
        v->bytes = malloc(size + 1);
        if (!v->bytes) return status(api, "lossops: out of memory reading attribute '%s'", name);
        if ((failed = get_string(info, name, (char *)v->bytes, &size))) return copied(api, failed);
        v->n = size ? size - 1 : 0; /* the size counts the terminating NUL */
        v->bytes[v->n] = '\0';
        v->kind = 's';
        return NULL;
    }
    if (absent(api, failed)) return NULL;
    float f;
    if (!(failed = ((attribute_int64_fn)SLOT(api, KernelInfoGetAttribute_int64))(info, name, &v->i))) {
        v->kind = 'i';
        return NULL;
    }
    ((release_status_fn)SLOT(api, ReleaseStatus))(failed);
    if (!(failed = ((attribute_float_fn)SLOT(api, KernelInfoGetAttribute_float))(info, name, &f))) {
        v->kind = 'f', v->f = f;
        return NULL;
    }
    ((release_status_fn)SLOT(api, ReleaseStatus))(failed);
    v->kind = 'n';
    /* the array getters succeed on a list of any kind, with the elements of the kind asked for */
    const char *lists[2] = {NOT_SINGLE_FLOATS, NOT_SINGLE_INTS};
    for (int k = 0; k < 2; k++) {
        size_t count = 0;
        attribute_array_fn get = (attribute_array_fn)(k ? SLOT(api, KernelInfoGetAttributeArray_int64)
                                                        : SLOT(api, KernelInfoGetAttributeArray_float));
        if ((failed = get(info, name, NULL, &count))) ((release_status_fn)SLOT(api, ReleaseStatus))(failed);
        else if (count) return v->phrase = lists[k], NULL;
    }
    void *allocator = NULL, *tensor = NULL;
    if ((failed = ((default_allocator_fn)SLOT(api, GetAllocatorWithDefaultOptions))(&allocator))) return copied(api, failed);
    if (!(failed = ((attribute_tensor_fn)SLOT(api, KernelInfoGetAttribute_tensor))(info, name, allocator, &tensor))) {
        ((release_value_fn)SLOT(api, ReleaseValue))(tensor);
        v->phrase = NOT_SINGLE_TENSOR;
        return NULL;
    }
    ((release_status_fn)SLOT(api, ReleaseStatus))(failed);
    v->phrase = NOT_SINGLE_STRINGS; /* the C API has a getter for no other kind: a list of strings, in practice */
    return NULL;
}

/* The attribute's value for the kernel (its code, or the number), or a status with opset/spec.py's words. */
static OrtStatus *check(const void *api, const struct lossops_attribute *a, const struct value *v, double *out) {
    char shown[4 * QUOTED_MOST + 16];
    if (v->kind == 'n') return status(api, a->not_single, v->phrase);
    if (v->kind == 's') quoted(v->bytes, v->n, shown, sizeof shown);
    else if (v->kind == 'i') snprintf(shown, sizeof shown, "%lld", (long long)v->i);
    else repr_float(v->f, shown, sizeof shown);
    if (v->kind != a->kind)
        return status(api, a->wrong_kind, shown, v->kind == 's' ? "str" : v->kind == 'i' ? "int" : "float");
    for (int k = 0; k < a->n_allowed; k++) { /* a string's exact bytes: "sum\0garbage" is not "sum" */
        if (a->kind == 's' && v->n == strlen(a->allowed_s[k]) && memcmp(v->bytes, a->allowed_s[k], v->n) == 0)
            return *out = (double)a->codes[k], NULL;
        if (a->kind == 'i' && v->i == a->allowed_i[k]) return *out = (double)v->i, NULL;
    }
    if (a->n_allowed == 0) {
        double x = a->kind == 'i' ? (double)v->i : v->f;
        if (isfinite(x) && x >= a->low && x <= a->high) return *out = x, NULL;
    }
    return status(api, a->not_allowed, shown);
}

static OrtStatus *create_kernel(const void *self, const void *api, const void *info, void **kernel) {
    const struct custom_op *entry = self;
    const struct lossops_op *op = entry->op;
    OrtStatus *failed = NULL;
    struct value v;
    /* KernelInfo cannot list a node's attributes: of the unknown ones, those another operator has are seen */
    for (int k = 0; k < op->n_foreign && !failed; k++) {
        failed = read_attribute(api, info, op->foreign[k], &v);
        free(v.bytes);
        if (!failed && v.kind) failed = status(api, op->unknown, op->foreign[k]);
    }
    if (failed) return failed;
    int64_t *state = malloc(8 * STATE_WORDS); /* released by ORT through C free (KernelDestroy) */
    if (!state) return status(api, "lossops: out of memory for a %s kernel", op->name);
    memset(state, 0, 8 * STATE_WORDS);
    double *params = (double *)(state + S_PARAMS);
    for (int k = 0; k < op->n_attributes && !failed; k++) {
        const struct lossops_attribute *a = &op->attributes[k];
        double value = 0;
        failed = read_attribute(api, info, a->name, &v);
        if (!failed && !v.kind) { /* absent: the default (valid by construction) */
            v.kind = a->kind;
            v.i = a->default_i;
            v.f = a->default_f;
            if (a->default_s) {
                v.n = strlen(a->default_s);
                v.bytes = (unsigned char *)strdup(a->default_s);
                if (!v.bytes) failed = status(api, "lossops: out of memory for a %s kernel", op->name);
            }
        }
        if (!failed) failed = check(api, a, &v, &value);
        free(v.bytes);
        if (!failed && a->param < 0) state[S_REDUCTION] = (int64_t)value;
        else if (!failed) params[a->param] = a->kind == 'f' ? (double)(float)value : value;
    }
    if (failed) {
        free(state);
        return failed;
    }
    state[S_COMPUTE] = (int64_t)(intptr_t)kernels.compute[entry->index];
    state[S_API] = (int64_t)(intptr_t)api;
    state[S_WORKER] = (int64_t)(intptr_t)kernels.task[entry->index];
    state[S_ELEM_TYPE] = entry->elem_type;
    state[S_ITEMSIZE] = entry->itemsize;
    *kernel = state;
    return NULL;
}

static const char *get_name(const void *self) { return ((const struct custom_op *)self)->op->name; }
static const char *get_provider(const void *self) { (void)self; return NULL; }
static int get_type(const void *self, size_t i) {
    const struct custom_op *c = self;
    return c->op->indices[i] ? INT64 : c->elem_type;
}
static int output_type(const void *self, size_t i) { (void)i; return ((const struct custom_op *)self)->elem_type; }
static size_t input_count(const void *self) { return (size_t)((const struct custom_op *)self)->op->n_inputs; }
static size_t output_count(const void *self) { (void)self; return 1; }
static int input_characteristic(const void *self, size_t i) {
    return ((const struct custom_op *)self)->op->optional[i] ? INPUT_OPTIONAL : INPUT_REQUIRED;
}
static int output_characteristic(const void *self, size_t i) { (void)self; (void)i; return INPUT_REQUIRED; }
static int memory_type(const void *self, size_t i) { (void)self; (void)i; return 0; }

/* --- RegisterCustomOps ------------------------------------------------------------------------------------ */

static struct custom_op custom_ops[N_OPS * N_TYPES];
static void *domain;
static int chosen;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void fill(void) {
    for (size_t i = 0; i < N_OPS; i++)
        for (size_t t = 0; t < N_TYPES; t++) {
            struct custom_op *c = &custom_ops[i * N_TYPES + t];
            c->op = &OPS[i];
            c->index = i;
            c->elem_type = TYPES[t].elem_type;
            c->itemsize = TYPES[t].itemsize;
            c->ort.version = LOSSOPS_OP_VERSION;
            c->ort.GetName = (void *)get_name;
            c->ort.GetExecutionProviderType = (void *)get_provider;
            c->ort.GetInputType = (void *)get_type;
            c->ort.GetInputTypeCount = (void *)input_count;
            c->ort.GetOutputType = (void *)output_type;
            c->ort.GetOutputTypeCount = (void *)output_count;
            c->ort.GetInputCharacteristic = (void *)input_characteristic;
            c->ort.GetOutputCharacteristic = (void *)output_characteristic;
            c->ort.GetInputMemoryType = (void *)memory_type;
            c->ort.CreateKernelV2 = (void *)create_kernel;
            c->ort.KernelComputeV2 = kernels.trampoline;
            c->ort.KernelDestroy = (void *)free;
        }
}

/* Once per process, under `lock`. The library stays mapped from then on: ONNX Runtime unloads a custom-op library
 * when the last session options holding it go, and a session created after that would choose, hash and load the
 * kernels again (milliseconds per session). */
static void start(void) {
    if (chosen) return;
    chosen = 1;
    Dl_info self;
    if (dladdr((void *)&kernels, &self) && self.dli_fname) dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    choose();
    if (kernels.level) fill();
}

/* Called by ONNX Runtime with the session options the library is registered on. Where no kernel library can be
 * used (said once, on stderr) or LOSSOPS_KERNELS=none, it registers nothing: the models' functions run. */
EXPORT OrtStatus *RegisterCustomOps(void *options, const OrtApiBase *base) {
    const void *api = base->GetApi(LOSSOPS_API_VERSION);
    if (!api) {
        const void *oldest = base->GetApi(1);
        return oldest ? status(oldest, "lossops: its kernels need ONNX Runtime 1.17 or later; this is %s",
                               base->GetVersionString())
                      : NULL;
    }
    OrtStatus *failed = NULL;
    pthread_mutex_lock(&lock);
    start();
    if (kernels.level && !domain) { /* one domain for every registration, never released: sessions point into it */
        void *created = NULL;
        failed = ((create_domain_fn)SLOT(api, CreateCustomOpDomain))(LOSSOPS_DOMAIN, &created);
        for (size_t k = 0; !failed && k < N_OPS * N_TYPES; k++)
            failed = ((domain_add_fn)SLOT(api, CustomOpDomain_Add))(created, &custom_ops[k]);
        if (!failed) domain = created;
    }
    pthread_mutex_unlock(&lock);
    if (failed || !kernels.level) return failed;
    return ((add_domain_fn)SLOT(api, AddCustomOpDomain))(options, domain);
}

/* What the library chose, for `lossops doctor` and the tests: a level, or why it registers no kernel. */
EXPORT const char *lossops_library_choice(void) {
    pthread_mutex_lock(&lock);
    start();
    pthread_mutex_unlock(&lock);
    return kernels.level ? kernels.level : kernels.error;
}
