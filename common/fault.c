/* fault.c — the table of faults that can be planted (see fault.h and docs/bug-classes.md). */
#include "common/fault.h"

#include <string.h>

const cpparity_fault_info cpparity_faults[CPPARITY_FAULT_COUNT] = {
    [CPPARITY_FAULT_NONE] = {"none", "nothing planted", "", false},
    [CPPARITY_FAULT_MASK_DROPPED] = {"mask-dropped",
                                     "after the all-to-all the mask is plain causal: padding, "
                                     "documents, windows and chunks ignored",
                                     "mask_description.c mask_storage_build_planted, "
                                     "layer_attention.c layer_attention_mask",
                                     false},
    [CPPARITY_FAULT_WINDOW_OFF_BY_ONE] = {"window-off-by-one", "sliding layers allow W + 1 keys",
                                          "layer_attention.c layer_attention_mask", false},
    [CPPARITY_FAULT_WINDOW_LOCAL] = {"window-local",
                                     "the window compares each token's index inside its rank's "
                                     "shard, not its index in the sequence",
                                     "kernel_cpu.c allowed_shard_local", true},
    [CPPARITY_FAULT_CHUNK_NO_LEFT_PAD] = {"chunk-no-left-pad",
                                          "the chunk grid starts at index 0, ignoring left "
                                          "padding",
                                          "mask_description.c mask_storage_build_planted", false},
    [CPPARITY_FAULT_CHUNK_LOCAL] = {"chunk-local",
                                    "the chunk grid restarts at every shard boundary",
                                    "kernel_cpu.c allowed_shard_local", true},
    [CPPARITY_FAULT_CHUNK_POSITION_RESTART] = {"chunk-position-restart",
                                               "chunks counted in positions restart at 0 with "
                                               "each document, whatever its first position",
                                               "mask_description.c mask_storage_build_planted",
                                               false},
    [CPPARITY_FAULT_POSITIONS_LOCAL] = {"positions-local",
                                        "rotary positions are the token's index inside its shard",
                                        "model_f32.c f32_model_rope_positions", false},
    [CPPARITY_FAULT_DOCS_LOCAL] = {"docs-local",
                                   "document ids are rebuilt per shard: a document spanning two "
                                   "ranks becomes two",
                                   "mask_description.c mask_storage_build_planted", false},
    [CPPARITY_FAULT_PADDING_SIDE] = {"padding-side",
                                     "padding is assumed on the right: the first n tokens of a "
                                     "row with n real tokens are the valid keys",
                                     "mask_description.c mask_storage_build_planted", false},
    [CPPARITY_FAULT_PAD_LEAK] = {"pad-leak", "padding keys are not masked",
                                 "mask_description.c mask_storage_build_planted", false},
    [CPPARITY_FAULT_LABEL_SHIFT_IN_SHARD] = {"label-shift-in-shard",
                                             "labels are shifted from input_ids inside each "
                                             "shard: the target crossing a shard boundary is lost",
                                             "shard.c shard_inject", false},
    [CPPARITY_FAULT_LOSS_MEAN_OF_MEANS] = {"loss-mean-of-means",
                                           "the loss is the mean over ranks of per-rank means",
                                           "model_f32_forward.c f32_model_forward, "
                                           "model_f32_backward.c f32_model_backward",
                                           false},
    [CPPARITY_FAULT_GRAD_SCALED_BY_CP] = {"grad-scaled-by-cp",
                                          "parameter gradients are averaged over the group "
                                          "instead of summed",
                                          "model_f32_backward.c reduce_gradients", false},
    [CPPARITY_FAULT_GRAD_NOT_REDUCED] = {"grad-not-reduced",
                                         "parameter gradients are not all-reduced",
                                         "model_f32_backward.c reduce_gradients", false},
    [CPPARITY_FAULT_A2A_HEAD_ORDER] = {"a2a-head-order",
                                       "the all-to-all before attention sends heads strided "
                                       "(head i·cp + r to rank r) while the one after it "
                                       "expects contiguous blocks",
                                       "ulysses.c ulysses_sent_head", false},
    [CPPARITY_FAULT_GQA_KV_MAPPING] = {"gqa-kv-mapping",
                                       "query head j reads kv head j mod Hkv instead of "
                                       "j / (H / Hkv)",
                                       "ulysses.c ulysses_repeated_head, kernel_cpu.c "
                                       "kv_head",
                                       false},
    [CPPARITY_FAULT_AUTOPAD_TRUNCATE] =
        {"autopad-truncate",
         "a sequence cp does not divide is truncated to "
         "cp · floor(S / cp) tokens",
         "shard.c shard_inject, model_f32_forward.c f32_model_forward", false},
    [CPPARITY_FAULT_AUTOPAD_UNMASKED] = {"autopad-unmasked",
                                         "automatic padding is a real token with a label "
                                         "(attention_mask 1, label = the pad token)",
                                         "shard.c shard_inject", false},
    [CPPARITY_FAULT_BACKWARD_ONLY] = {"backward-only",
                                      "the kernel's dk misses the softmax scale (forward right)",
                                      "kernel_cpu.c backward_rows", true},
    [CPPARITY_FAULT_STALE_RANK_SLICE] = {"stale-rank-slice",
                                         "each rank reports the logits slice of the next rank",
                                         "model_f32_forward.c report_slice", false},
    [CPPARITY_FAULT_FULLY_MASKED_NAN] = {"fully-masked-nan",
                                         "a query row with no allowed key divides 0 by 0 (NaN "
                                         "output)",
                                         "kernel_cpu.c forward_rows", true},
    [CPPARITY_FAULT_SCALE_DROPPED] = {"scale-dropped",
                                      "the kernel is called with scale 1 instead of 1/sqrt(Dh)",
                                      "layer_attention.c layer_attention_scale", false},
    [CPPARITY_FAULT_LAYER_TYPE_MIXUP] = {"layer-type-mixup",
                                         "layer l gets the attention type of layer n - 1 - l",
                                         "layer_attention.c layer_attention_mask", false},
    [CPPARITY_FAULT_KERNEL_TILING] = {"kernel-tiling",
                                      "the kernel skips a last key tile shorter than the tile "
                                      "size",
                                      "kernel_cpu.c key_tile_end", true},
    [CPPARITY_FAULT_SOFTMAX_MERGE] = {"softmax-merge",
                                      "the online softmax does not rescale the output "
                                      "accumulated so far when a later tile raises the maximum",
                                      "kernel_cpu.c forward_rows", true},
    [CPPARITY_FAULT_TILE_CLASSIFICATION] = {"tile-classification",
                                            "tile classification skips the key-validity scan: "
                                            "a tile with padding keys can be all-allowed",
                                            "mask_predicate.h mask_classify_tile_scanning, "
                                            "kernel_cpu.c classify",
                                            true},
    [CPPARITY_FAULT_KV_SUM_BACK] = {"kv-sum-back",
                                    "gradients of replicated kv heads keep the first repeat "
                                    "instead of summing every repeat",
                                    "ulysses.c ulysses_sums_repeat", false},
    [CPPARITY_FAULT_GRAD_REDUCE_ORDER] = {"grad-reduce-order",
                                          "gradients are summed over the group starting from "
                                          "each rank's own, so ranks differ in the last bits",
                                          "model_f32_backward.c reduce_gradients", false},
    [CPPARITY_FAULT_LSE_LAYOUT] = {"lse-layout",
                                   "the forward writes lse as [B, S, H], the backward reads "
                                   "[B, H, S]",
                                   "kernel_cpu.c forward_rows", true},
    [CPPARITY_FAULT_RING_MERGE_MAX] = {"ring-merge-max",
                                       "ring attention merges a step's output with the running "
                                       "maximum as the new log-sum-exp, never normalising the sum",
                                       "ring_merge.h ring_merge_row", false},
    [CPPARITY_FAULT_RING_MERGE_STEP_LSE] = {"ring-merge-step-lse",
                                            "ring attention adds a step's output without weighing "
                                            "it by its log-sum-exp",
                                            "ring_merge.h ring_merge_row", false},
    [CPPARITY_FAULT_RING_LAST_STEP] = {"ring-last-step",
                                       "ring attention skips the last key/value step (the block "
                                       "of the next rank)",
                                       "ring.c ring_step_count", false},
    [CPPARITY_FAULT_RING_CAUSAL_SKIP] = {"ring-causal-skip",
                                         "ring attention skips a pair of runs whose first key "
                                         "reaches their first query: the causal diagonal block",
                                         "ring.c runs_meet", false},
    [CPPARITY_FAULT_RING_DKV_DIRECTION] = {"ring-dkv-direction",
                                           "ring attention sends dK and dV home the wrong way "
                                           "round the ring (to rank − 1, not + 1)",
                                           "ring.c ring_attention_backward", false},
    [CPPARITY_FAULT_ZIGZAG_CHUNK_SWAP] = {"zigzag-chunk-swap",
                                          "the zigzag layout swaps the two chunks of rank 1 "
                                          "(chunk 2·cp − 2 first)",
                                          "shard.c shard_position", false},
    [CPPARITY_FAULT_HYBRID_GROUP_ACROSS_RING] = {"hybrid-group-across-ring",
                                                 "a hybrid's Ulysses groups are formed across "
                                                 "the ring dimension (ranks r mod R, not r / U)",
                                                 "model_f32.c set_up_algorithm", false},
};

int cpparity_fault_from_name(const char *name) {
    for (int f = 0; name != NULL && f < CPPARITY_FAULT_COUNT; f++) {
        if (strcmp(cpparity_faults[f].name, name) == 0) {
            return f;
        }
    }
    return -1;
}

const char *cpparity_fault_name(cpparity_fault fault) {
    return (int)fault >= 0 && fault < CPPARITY_FAULT_COUNT ? cpparity_faults[fault].name : "?";
}
