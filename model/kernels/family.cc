// The kernels of one CPU family, as its table (model/kernels/table.h). The
// family files are compiled once per family, each time with that family's
// -march and with TEXTGEN_KERNEL_FAMILY naming the namespace they fill, so the
// same source becomes the generic (x86-64-v2), avx2 (x86-64-v3: AVX2 + FMA)
// and avx512 (x86-64-v4 + VNNI) kernels (model/kernels/CMakeLists.txt). One
// concept a file:
//   family_vectors.h        the shared vector helpers (Vec, Load, MulAdd,
//                           bf16), and why they are in an unnamed namespace;
//   family_panels.h         the panel tiles and groups and kInt8's quad dot
//                           products, shared by the two products below;
//   family_matmul.cc        packed f32, bf16 and Q8_0 weights (MatMulF32,
//                           MatMulBf16, MatMulW8A32, QuantizeRows, MatMulInt8);
//   family_block_panels.cc  ggml's block types (MatMulBlockPanel,
//                           MatMulBlockPanelInt8);
//   family_attention.cc     AttentionScores and WeightedSum, f32 and bf16;
//   family_elementwise.cc   Dot, Sum, Softmax, RowStats, Entropy, SumExp,
//                           ArgMax, GeluTanh, SiluMultiply, RoundToBf16;
//   family_functions.h      the declarations of all of these, which this file
//                           lists in the family's kTable.
#include "model/kernels/family_functions.h"
#include "model/kernels/table.h"

namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY {

#define TEXTGEN_STRINGIFY_(x) #x
#define TEXTGEN_STRINGIFY(x) TEXTGEN_STRINGIFY_(x)

const KernelTable kTable = {
    TEXTGEN_STRINGIFY(TEXTGEN_KERNEL_FAMILY),
    Dot,
    Sum,
    MatMulF32,
    MatMulBf16,
    QuantizeRows,
    MatMulInt8,
    MatMulW8A32,
    MatMulBlockPanel,
    MatMulBlockPanelInt8,
    AttentionScores,
    WeightedSum,
    AttentionScoresBf16,
    WeightedSumBf16,
    Softmax,
    Entropy,
    SumExp,
    ArgMax,
    RowStats,
    GeluTanh,
    SiluMultiply,
    RoundToBf16,
};

}  // namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY
