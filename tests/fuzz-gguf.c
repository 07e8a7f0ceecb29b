/*
 * fuzz-gguf.c - libFuzzer target for the GGUF parser: any input must be
 * accepted or rejected with an error, never crash or leak.
 */
#include "infer.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    infer_gguf *g;
    if (infer_gguf_open_memory(&g, data, size) == INFER_OK) {
        /* walk everything a caller could ask for */
        char buf[256];
        for (int64_t i = 0; i < infer_gguf_n_kv(g); i++)
            infer_gguf_kv_format(g, i, buf, sizeof(buf));
        for (int64_t i = 0; i < infer_gguf_n_tensors(g); i++) {
            infer_tensor_info t;
            infer_gguf_tensor(g, i, &t);
        }
        infer_gguf_get_str(g, "general.architecture", NULL);
        infer_gguf_close(g);
    }
    return 0;
}
