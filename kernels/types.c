/*
 * types.c - the ggml type traits table (see types.h).
 *
 * Block sizes and byte sizes follow ggml's ggml-common.h block structs; the
 * static_asserts in quants.h pin the structs we dequantize to these numbers.
 */
#include "types.h"

#include "repack.h"

#define QK_K 256

static const struct ggml_type_traits type_traits[INFER_TYPE_COUNT] = {
    [GGML_TYPE_F32] = {"F32", 1, 4, false},
    [GGML_TYPE_F16] = {"F16", 1, 2, false},
    [GGML_TYPE_Q4_0] = {"Q4_0", 32, 18, true},
    [GGML_TYPE_Q4_1] = {"Q4_1", 32, 20, true},
    [GGML_TYPE_Q5_0] = {"Q5_0", 32, 22, true},
    [GGML_TYPE_Q5_1] = {"Q5_1", 32, 24, true},
    [GGML_TYPE_Q8_0] = {"Q8_0", 32, 34, true},
    [GGML_TYPE_Q8_1] = {"Q8_1", 32, 36, true},
    [GGML_TYPE_Q2_K] = {"Q2_K", QK_K, 84, true},
    [GGML_TYPE_Q3_K] = {"Q3_K", QK_K, 110, true},
    [GGML_TYPE_Q4_K] = {"Q4_K", QK_K, 144, true},
    [GGML_TYPE_Q5_K] = {"Q5_K", QK_K, 176, true},
    [GGML_TYPE_Q6_K] = {"Q6_K", QK_K, 210, true},
    [GGML_TYPE_Q8_K] = {"Q8_K", QK_K, 292, true},
    [GGML_TYPE_IQ2_XXS] = {"IQ2_XXS", QK_K, 66, true},
    [GGML_TYPE_IQ2_XS] = {"IQ2_XS", QK_K, 74, true},
    [GGML_TYPE_IQ3_XXS] = {"IQ3_XXS", QK_K, 98, true},
    [GGML_TYPE_IQ1_S] = {"IQ1_S", QK_K, 50, true},
    [GGML_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18, true},
    [GGML_TYPE_IQ3_S] = {"IQ3_S", QK_K, 110, true},
    [GGML_TYPE_IQ2_S] = {"IQ2_S", QK_K, 82, true},
    [GGML_TYPE_IQ4_XS] = {"IQ4_XS", QK_K, 136, true},
    [GGML_TYPE_I8] = {"I8", 1, 1, false},
    [GGML_TYPE_I16] = {"I16", 1, 2, false},
    [GGML_TYPE_I32] = {"I32", 1, 4, false},
    [GGML_TYPE_I64] = {"I64", 1, 8, false},
    [GGML_TYPE_F64] = {"F64", 1, 8, false},
    [GGML_TYPE_IQ1_M] = {"IQ1_M", QK_K, 56, true},
    [GGML_TYPE_BF16] = {"BF16", 1, 2, false},
    [GGML_TYPE_TQ1_0] = {"TQ1_0", QK_K, 54, true},
    [GGML_TYPE_TQ2_0] = {"TQ2_0", QK_K, 66, true},
    [GGML_TYPE_MXFP4] = {"MXFP4", 32, 17, true},
    /* infer's repacked layouts (repack.h): same blocks, other order */
    [INFER_TYPE_Q4_0_X4] = {"Q4_0x4", 32, 18, true},
    [INFER_TYPE_Q5_0_X4] = {"Q5_0x4", 32, 22, true},
    [INFER_TYPE_Q4_K_X4] = {"Q4_Kx4", 256, 144, true},
    [INFER_TYPE_Q6_K_X4] = {"Q6_Kx4", 256, 210, true},
    [INFER_TYPE_Q8_0_X4] = {"Q8_0x4", 32, 34, true},
    [INFER_TYPE_Q4_0_X4S] = {"Q4_0x4s", 32, 18, true},
    [INFER_TYPE_IQ4_NL_X4] = {"IQ4_NLx4", 32, 18, true},
    [INFER_TYPE_Q3_K_X4] = {"Q3_Kx4", 256, 110, true},
    [INFER_TYPE_Q4_K_X4I] = {"Q4_Kx4i", 256, 144, true},
};

const struct ggml_type_traits *ggml_type_traits_get(uint32_t type)
{
    if (type >= INFER_TYPE_COUNT || type_traits[type].name == NULL)
        return NULL;
    return &type_traits[type];
}

size_t ggml_row_size(uint32_t type, int64_t n)
{
    const struct ggml_type_traits *t = ggml_type_traits_get(type);
    if (t == NULL || n < 0 || n % t->block_size != 0)
        return 0;
    return (size_t)(n / t->block_size) * t->type_size;
}
