/* The conformance suite in a host written in C: no Python in the process. Usage:
 *
 *     node_test_runner LIBONNXRUNTIME LOSSOPS_LIBRARY OUT_DIR < case directories, one per line
 *
 * It loads ONNX Runtime's shared library, registers lossops' native custom-op library on one SessionOptions
 * (two intra-op threads), and runs each node-test case (model.onnx, test_data_set_0/input_<k>.pb) as onnx's
 * backend tests do: the inputs are the TensorProtos' raw data, named by the protos. It writes the output as a
 * TensorProto (dims, type, name, raw data) to OUT_DIR/<case>.pb, or ONNX Runtime's error to OUT_DIR/<case>.error,
 * and prints one line per case. lossops.conformance.c_runner builds it (the OrtApi slots come from
 * ort_ext/machine_code/capi.py as -DSLOT_<name>=<slot>), runs it natively or under qemu, and holds the outputs to the suite.
 * It reads the protos the suite writes (raw_data, no external data); anything else is a case's error. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void OrtStatus;
typedef struct {
    const void *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
} OrtApiBase;

static const void *api;
#define FN(name, ...) ((OrtStatus * (*)(__VA_ARGS__))((void *const *)api)[SLOT_##name])
#define RELEASE(name, value) ((void (*)(void *))((void *const *)api)[SLOT_Release##name])(value)
#define MAX_INPUTS 8
#define MAX_DIMS 16

struct tensor {
    char name[256];
    int type;
    int64_t dims[MAX_DIMS];
    size_t rank;
    unsigned char *data;
    size_t size;
};

static unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc(n > 0 ? (size_t)n : 1);
    *size = n > 0 && fread(data, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
    fclose(f);
    return data;
}

static int varint(const unsigned char **p, const unsigned char *end, uint64_t *out) {
    *out = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char b = *(*p)++;
        *out |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return 0;
    }
    return 1;
}

/* A TensorProto's dims (1), data_type (2), name (8) and raw_data (9); 0, or 1 where it is not one of those. */
static int parse_tensor(const unsigned char *p, size_t n, struct tensor *t) {
    const unsigned char *end = p + n;
    memset(t, 0, sizeof *t);
    while (p < end) {
        uint64_t key, value, length;
        if (varint(&p, end, &key)) return 1;
        int field = (int)(key >> 3), wire = (int)(key & 7);
        if (wire == 0) {
            if (varint(&p, end, &value)) return 1;
            if (field == 1 && t->rank < MAX_DIMS) t->dims[t->rank++] = (int64_t)value;
            else if (field == 2) t->type = (int)value;
            else if (field == 1) return 1;
        } else if (wire == 2) {
            if (varint(&p, end, &length) || length > (uint64_t)(end - p)) return 1;
            const unsigned char *field_end = p + length;
            if (field == 1) { /* packed dims */
                while (p < field_end)
                    if (t->rank >= MAX_DIMS || varint(&p, field_end, &value)) return 1;
                    else t->dims[t->rank++] = (int64_t)value;
            } else if (field == 8 && length < sizeof t->name) {
                memcpy(t->name, p, length);
            } else if (field == 9) {
                t->data = malloc(length ? length : 1);
                memcpy(t->data, p, length);
                t->size = length;
            } else if (field != 8 && field != 12) { /* 12: doc_string */
                return 1; /* typed data fields, segments, external data: not what the suite writes */
            }
            p = field_end;
        } else if (wire == 5) {
            p += 4;
        } else if (wire == 1) {
            p += 8;
        } else {
            return 1;
        }
    }
    if (!t->data) t->data = malloc(1); /* an empty tensor: ONNX Runtime wants an address */
    return 0;
}

static void put_varint(FILE *f, uint64_t v) {
    do {
        unsigned char b = v & 0x7F;
        v >>= 7;
        fputc(b | (v ? 0x80 : 0), f);
    } while (v);
}

static void write_tensor(const char *path, const char *name, int type, const int64_t *dims, size_t rank,
                         const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    for (size_t d = 0; d < rank; d++) put_varint(f, 1 << 3), put_varint(f, (uint64_t)dims[d]);
    put_varint(f, 2 << 3), put_varint(f, (uint64_t)type);
    put_varint(f, (8 << 3) | 2), put_varint(f, strlen(name)), fwrite(name, 1, strlen(name), f);
    put_varint(f, (9 << 3) | 2), put_varint(f, size), fwrite(data, 1, size, f);
    fclose(f);
}

static size_t item_size(int type) {
    switch (type) {
    case 1: return 4;   /* float */
    case 11: return 8;  /* double */
    case 10: case 16: return 2; /* float16, bfloat16 */
    default: return 0;
    }
}

/* Run one case; "" or the error, in `error`. */
static void run_case(const char *dir, void *env, void *options, void *memory, const char *out_dir,
                     const char *case_name, char *error, size_t n) {
    char path[4096];
    struct tensor inputs[MAX_INPUTS], expected;
    void *values[MAX_INPUTS] = {0}, *session = NULL, *output = NULL, *info = NULL;
    const char *names[MAX_INPUTS];
    size_t count = 0, size;
    OrtStatus *status = NULL;
    *error = 0;
    for (; count < MAX_INPUTS; count++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/input_%zu.pb", dir, count);
        unsigned char *data = read_file(path, &size);
        if (!data) break;
        int bad = parse_tensor(data, size, &inputs[count]);
        free(data);
        if (bad) return (void)snprintf(error, n, "input_%zu.pb is not a TensorProto with raw_data", count);
        names[count] = inputs[count].name;
    }
    snprintf(path, sizeof path, "%s/test_data_set_0/output_0.pb", dir);
    unsigned char *data = read_file(path, &size);
    if (!data || parse_tensor(data, size, &expected))
        return free(data), (void)snprintf(error, n, "output_0.pb is missing or not a TensorProto");
    free(data);
    free(expected.data);
    const char *output_name = expected.name;
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    if ((status = FN(CreateSession, void *, const char *, void *, void **)(env, path, options, &session))) goto done;
    for (size_t k = 0; k < count; k++)
        if ((status = FN(CreateTensorWithDataAsOrtValue, void *, void *, size_t, const int64_t *, size_t, int,
                         void **)(memory, inputs[k].data, inputs[k].size, inputs[k].dims, inputs[k].rank,
                                  inputs[k].type, &values[k])))
            goto done;
    if ((status = FN(Run, void *, const void *, const char *const *, void *const *, size_t, const char *const *,
                     size_t, void **)(session, NULL, names, values, count, &output_name, 1, &output)))
        goto done;
    int type;
    size_t rank, elements;
    int64_t dims[MAX_DIMS];
    void *result;
    if ((status = FN(GetTensorTypeAndShape, void *, void **)(output, &info)) ||
        (status = FN(GetTensorElementType, void *, int *)(info, &type)) ||
        (status = FN(GetDimensionsCount, void *, size_t *)(info, &rank)) ||
        (rank > MAX_DIMS ? (snprintf(error, n, "rank %zu", rank), 1) : 0) ||
        (status = FN(GetDimensions, void *, int64_t *, size_t)(info, dims, rank)) ||
        (status = FN(GetTensorShapeElementCount, void *, size_t *)(info, &elements)) ||
        (status = FN(GetTensorMutableData, void *, void **)(output, &result)))
        goto done;
    if (!item_size(type)) {
        snprintf(error, n, "output element type %d", type);
        goto done;
    }
    snprintf(path, sizeof path, "%s/%s.pb", out_dir, case_name);
    write_tensor(path, output_name, type, dims, rank, result, elements * item_size(type));
done:
    if (status) {
        snprintf(error, n, "%s", ((const char *(*)(OrtStatus *))((void *const *)api)[SLOT_GetErrorMessage])(status));
        RELEASE(Status, status);
    }
    if (info) RELEASE(TensorTypeAndShapeInfo, info);
    if (output) RELEASE(Value, output);
    for (size_t k = 0; k < count; k++) {
        if (values[k]) RELEASE(Value, values[k]);
        free(inputs[k].data);
    }
    if (session) RELEASE(Session, session);
}

int main(int argc, char **argv) {
    if (argc != 4) return fprintf(stderr, "usage: %s LIBONNXRUNTIME LOSSOPS_LIBRARY OUT_DIR < cases\n", argv[0]), 2;
    void *ort = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!ort) return fprintf(stderr, "%s\n", dlerror()), 1;
    const OrtApiBase *(*api_base)(void) = (const OrtApiBase *(*)(void))dlsym(ort, "OrtGetApiBase");
    if (!api_base || !(api = api_base()->GetApi(17))) return fprintf(stderr, "no OrtApi 17 in %s\n", argv[1]), 1;
    void *env, *options, *memory;
    char error[4096], line[4096], path[4096];
    OrtStatus *status;
    if ((status = FN(CreateEnv, int, const char *, void **)(3, "lossops-conformance", &env)) ||
        (status = FN(CreateSessionOptions, void **)(&options)) ||
        (status = FN(SetIntraOpNumThreads, void *, int)(options, 2)) ||
        (status = FN(RegisterCustomOpsLibrary_V2, void *, const char *)(options, argv[2])) ||
        (status = FN(CreateCpuMemoryInfo, int, int, void **)(0, 0, &memory))) {
        fprintf(stderr, "%s\n", ((const char *(*)(OrtStatus *))((void *const *)api)[SLOT_GetErrorMessage])(status));
        return 1;
    }
    void *lossops = dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD); /* ONNX Runtime loaded it: what did it choose */
    const char *(*choice)(void) = lossops ? (const char *(*)(void))dlsym(lossops, "lossops_library_choice") : NULL;
    printf("onnxruntime %s, lossops kernels: %s\n", api_base()->GetVersionString(), choice ? choice() : "?");
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!*line) continue;
        const char *slash = strrchr(line, '/'), *name = slash ? slash + 1 : line;
        run_case(line, env, options, memory, argv[3], name, error, sizeof error);
        if (*error) {
            snprintf(path, sizeof path, "%s/%s.error", argv[3], name);
            FILE *f = fopen(path, "w");
            if (f) fputs(error, f), fclose(f);
        }
        printf("%s %s\n", *error ? "error" : "ran", name);
        fflush(stdout);
    }
    return 0;
}
