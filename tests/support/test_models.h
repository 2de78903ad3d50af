/* test_models.h — test-only: the small model configuration unit tests share. */
#ifndef CPPARITY_TESTS_SUPPORT_TEST_MODELS_H
#define CPPARITY_TESTS_SUPPORT_TEST_MODELS_H

#include "common/model_config.h"
#include "reference/model.h"

/* V 11, D 8, two layers of the given types, H 4, Hkv 2 (grouped-query), Dh 4, F 12,
 * W = C = 3, every other field at its default: small enough for finite differences, with every
 * mask feature available. */
cpparity_model_config test_small_model(cpparity_layer_type first, cpparity_layer_type second);

/* The whole logits [B, S, V] of the model's last forward, row block by row block (the model
 * never holds them whole; a test at test sizes may): a malloc'd array the caller frees. */
double *test_reference_logits(const reference_model *model);

#endif
