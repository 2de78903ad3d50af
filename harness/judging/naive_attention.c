/* naive_attention.c — attention row by row in float32 (see naive_attention.h). */
#include "harness/judging/naive_attention.h"

#include <math.h>
#include <string.h>

/* keys[0..*count) = the keys query q of row b may attend, in increasing order. */
static void allowed_keys(const reference_mask *mask, int64_t b, int64_t q, int64_t *keys,
                         int64_t *count) {
    *count = 0;
    for (int64_t k = 0; k <= q; k++) {
        if (reference_mask_allowed(mask, b, q, k)) {
            keys[(*count)++] = k;
        }
    }
}

/* out (B,S,H,Dh), lse (B,H,S) from q, k, v: scores of each row, maximum, exponentials, sum. */
void naive_float_attention_forward(float *out, float *lse, const float *q, const float *k,
                                   const float *v, const reference_mask *mask,
                                   naive_attention_shape s, float scale, int64_t *keys,
                                   float *scores) {
    const int64_t group = s.heads / s.kv_heads, Dh = s.head_dim;
    for (int64_t b = 0; b < s.batch; b++) {
        for (int64_t t = 0; t < s.seq_len; t++) {
            int64_t count = 0;
            allowed_keys(mask, b, t, keys, &count);
            for (int64_t h = 0; h < s.heads; h++) {
                const float *query = q + ((b * s.seq_len + t) * s.heads + h) * Dh;
                float *row = out + ((b * s.seq_len + t) * s.heads + h) * Dh;
                const int64_t kv = h / group;
                memset(row, 0, (size_t)Dh * sizeof *row);
                if (count == 0) {
                    lse[(b * s.heads + h) * s.seq_len + t] = -INFINITY;
                    continue;
                }
                float maximum = -INFINITY;
                for (int64_t j = 0; j < count; j++) {
                    const float *key = k + ((b * s.seq_len + keys[j]) * s.kv_heads + kv) * Dh;
                    float dot = 0.0f;
                    for (int64_t d = 0; d < Dh; d++) {
                        dot += query[d] * key[d];
                    }
                    scores[j] = scale * dot;
                    maximum = scores[j] > maximum ? scores[j] : maximum;
                }
                float sum = 0.0f;
                for (int64_t j = 0; j < count; j++) {
                    scores[j] = expf(scores[j] - maximum);
                    sum += scores[j];
                }
                for (int64_t j = 0; j < count; j++) {
                    const float p = scores[j] / sum;
                    const float *value = v + ((b * s.seq_len + keys[j]) * s.kv_heads + kv) * Dh;
                    for (int64_t d = 0; d < Dh; d++) {
                        row[d] += p * value[d];
                    }
                }
                lse[(b * s.heads + h) * s.seq_len + t] = maximum + logf(sum);
            }
        }
    }
}

/* dq, dk, dv += gradients of Σ dout ⊙ out, probabilities recomputed from lse. */
void naive_float_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *out, const float *lse, const reference_mask *mask,
                                    naive_attention_shape s, float scale, int64_t *keys) {
    const int64_t group = s.heads / s.kv_heads, Dh = s.head_dim;
    for (int64_t b = 0; b < s.batch; b++) {
        for (int64_t t = 0; t < s.seq_len; t++) {
            int64_t count = 0;
            allowed_keys(mask, b, t, keys, &count);
            for (int64_t h = 0; h < s.heads && count > 0; h++) {
                const int64_t row = ((b * s.seq_len + t) * s.heads + h) * Dh;
                const int64_t kv = h / group;
                const float row_lse = lse[(b * s.heads + h) * s.seq_len + t];
                float delta = 0.0f;
                for (int64_t d = 0; d < Dh; d++) {
                    delta += dout[row + d] * out[row + d];
                }
                for (int64_t j = 0; j < count; j++) {
                    const int64_t key = ((b * s.seq_len + keys[j]) * s.kv_heads + kv) * Dh;
                    float dot = 0.0f, dp = 0.0f;
                    for (int64_t d = 0; d < Dh; d++) {
                        dot += q[row + d] * k[key + d];
                        dp += dout[row + d] * v[key + d];
                    }
                    const float p = expf(scale * dot - row_lse);
                    const float ds = p * (dp - delta);
                    for (int64_t d = 0; d < Dh; d++) {
                        dq[row + d] += scale * ds * k[key + d];
                        dk[key + d] += scale * ds * q[row + d];
                        dv[key + d] += p * dout[row + d];
                    }
                }
            }
        }
    }
}
