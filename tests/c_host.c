/* An ONNX Runtime host written in C, for tests/test_library.py: no Python in the process. It loads ONNX
 * Runtime's shared library (argv[1]), registers lossops' native library (argv[2]) on its session options, runs
 * the model at argv[3] (inputs `input` and `target`, float32 [n], n = argv[4]) on two intra-op threads, with
 * inputs made here from formulas the test repeats, and prints every output element, or ONNX Runtime's error.
 * The OrtApi slots come from ort_ext/capi.py (-DSLOT_<name>=<slot>), as for the library itself. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void OrtStatus;
typedef struct {
    const void *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
} OrtApiBase;

static const void *api;
#define FN(name, ...) ((OrtStatus * (*)(__VA_ARGS__))((void *const *)api)[SLOT_##name])

static int failed(OrtStatus *status) {
    if (!status) return 0;
    printf("error: %s\n", ((const char *(*)(OrtStatus *))((void *const *)api)[SLOT_GetErrorMessage])(status));
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    void *ort = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!ort) return printf("error: %s\n", dlerror()), 1;
    const OrtApiBase *(*api_base)(void) = (const OrtApiBase *(*)(void))dlsym(ort, "OrtGetApiBase");
    api = api_base()->GetApi(17);
    void *env, *options, *session, *memory, *inputs[2], *output = NULL;
    long n = atol(argv[4]);
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *out;
    for (long i = 0; i < n; i++) {
        x[i] = (float)(3.0 * sin(0.37 * (double)i));
        y[i] = (float)(0.5 + 0.5 * cos(0.11 * (double)i));
    }
    int64_t shape[1] = {n};
    const char *input_names[2] = {"input", "target"}, *output_names[1] = {"output"};
    if (failed(FN(CreateEnv, int, const char *, void **)(3, "lossops-c-host", &env)) ||  /* log errors only */
        failed(FN(CreateSessionOptions, void **)(&options)) ||
        failed(FN(SetIntraOpNumThreads, void *, int)(options, 2)) ||
        failed(FN(RegisterCustomOpsLibrary_V2, void *, const char *)(options, argv[2])) ||
        failed(FN(CreateSession, void *, const char *, void *, void **)(env, argv[3], options, &session)) ||
        failed(FN(CreateCpuMemoryInfo, int, int, void **)(0, 0, &memory)) ||  /* device allocator, default */
        failed(FN(CreateTensorWithDataAsOrtValue, void *, void *, size_t, const int64_t *, size_t, int, void **)(
            memory, x, n * sizeof(float), shape, 1, 1, &inputs[0])) ||  /* 1: float */
        failed(FN(CreateTensorWithDataAsOrtValue, void *, void *, size_t, const int64_t *, size_t, int, void **)(
            memory, y, n * sizeof(float), shape, 1, 1, &inputs[1])) ||
        failed(FN(Run, void *, const void *, const char *const *, void *const *, size_t, const char *const *, size_t,
                  void **)(session, NULL, input_names, inputs, 2, output_names, 1, &output)) ||
        failed(FN(GetTensorMutableData, void *, void **)(output, (void **)&out)))
        return 0;  /* the error is the result */
    /* the output's element count: the input's for `none`, 1 for a reduction (argv[3]'s model says which) */
    void *info;
    size_t count;
    if (failed(FN(GetTensorTypeAndShape, void *, void **)(output, &info)) ||
        failed(FN(GetTensorShapeElementCount, void *, size_t *)(info, &count)))
        return 1;
    for (size_t i = 0; i < count; i++) printf("%.9g\n", out[i]);
    return 0;
}
