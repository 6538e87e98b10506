/* The networks the CUDA tests build, in one table (Lua code, batch,
 * classes): test_cuda_net, test_cuda_graph and test_cuda_ops build them on
 * the GPU; test_cuda_cmp builds every one on the CPU backend at the same
 * batch and runs it forward and backward, and test_nn_gradcheck checks the
 * hand-written ones against finite differences, so that a table that
 * stops building or loses its gradients fails on every machine, not on
 * the next GPU (test_resnet_kinds's did not build, and no CPU test built
 * it). Header-only. */
#ifndef GF_TEST_CUDA_NETS_H
#define GF_TEST_CUDA_NETS_H

/* test_cuda_net: the DC-GAN at 32x32 (batch 16, z 100), the conditional
 * DC-GAN at 16x16 (batch 10, z 20, 10 classes), the classifier (batch 8) */
#define NET_DCGAN_G "return require('backbones.dcgan').G{ size = 32 }"
#define NET_DCGAN_D "return require('backbones.dcgan').D{ size = 32 }"
#define NET_DCGAN_CG "return require('backbones.dcgan').CG{ size = 16, z = 20 }"
#define NET_DCGAN_CD "return require('backbones.dcgan').CD{ size = 16 }"
#define NET_CLASSIFIER "return require('backbones.classifier').classifier{ size = 28 }"

/* The layer types the DC-GANs do not use, in one network (transposed
 * conv, unfused upsample x3, average pooling, 1d batchnorm, dropout,
 * sigmoid, softmax; max pooling is the classifier's). 12 inputs, 10
 * outputs, batch 6. tanh after the batchnorm: a ReLU there, over
 * statistics of 6 samples, turns bf16 rounding into kink crossings that
 * moved the input gradient by 15 % (normwise) in the emulation of
 * test_cuda_cmp, which no tolerance can tell from a bug. */
#define NET_ALL_LAYERS                                                                                        \
	"return { {'linear', 12, 64}, {'bn', 64}, {'tanh'}, {'reshape', 4, 4, 4},"                            \
	" {'tconv', 4, 6, 4, 2, 1}, {'upsample', 3}, {'conv', 6, 5, 3, 1, 1}, {'avgpool', 2},"                \
	" {'tanh'}, {'dropout', 0.3}, {'conv', 5, 3, 3, 2, 1}, {'lrelu', 0.1}, {'dropout2d', 0.2},"           \
	" {'sigmoid'}, {'flatten'}, {'linear', 108, 10}, {'softmax'},"                                        \
	" input_shape = {12} }"

/* The ResNet/BigGAN kinds (issue 14): split chunks of z, instancenorm,
 * residual add, global sum pooling, in a small up/down residual network;
 * the pooled features (3) and the second chunk of z (8) concatenated into
 * the last linear (11 -> 10). A tanh between the last instancenorm and
 * the pooling: a sum over an instance-normalised plane is 0 whatever the
 * input, which left every layer before it a zero gradient (noise on both
 * sides); and a ReLU there, over planes of 16 values, made bf16 rounding
 * cross its kink often enough to move dx by 26 % (normwise). */
#define NET_RESNET_KINDS                                                                                      \
	"return { {'linear', 12, 40, name = 'z'}, {'split', 0, 32}, {'reshape', 2, 4, 4},"                    \
	" {'instancenorm', 2, affine = true}, {'relu', name = 'h'}, {'conv', 2, 2, 3, 1, 1},"                 \
	" {'add', with = 'h'}, {'upsample', 2}, {'conv', 2, 3, 3, 1, 1, name = 'u'}, {'avgpool', 2},"        \
	" {'instancenorm', 3}, {'tanh'}, {'gsp', name = 'pooled'}, {'split', 32, 40, input = 'z', name = 'c'}," \
	" {'concat', input = 'pooled', with = 'c'}, {'linear', 11, 10},"                                      \
	" input_shape = {12} }"

/* Conditional batchnorm (a cond chunk of z with spectral norm and
 * projection biases; a class embedding) and the projection head, BigGAN's
 * conditioning; 5 classes. */
#define NET_CBN_PROJ                                                                                          \
	"return { {'linear', 12, 40, name = 'z'}, {'split', 0, 32}, {'reshape', 2, 4, 4},"                    \
	" {'split', 32, 40, input = 'z', name = 'c'},"                                                        \
	" {'cbn', 2, cond = 'c', sn = true, bias = true, input = 3}, {'relu'}, {'conv', 2, 3, 3, 1, 1},"      \
	" {'cbn', 3, classes = 5}, {'lrelu', 0.2}, {'gsp', name = 'h'}, {'linear', 3, 1, sn = true},"        \
	" {'proj', 5, 3, with = 'h', sn = true}, {'linear', 1, 10},"                                         \
	" input_shape = {12} }"

/* test_cuda_net's training and checkpoints and test_cuda_graph: the DC-GAN
 * at 16x16, z 16, batch 8 */
#define NET_SMALL_G "return require('backbones.dcgan').G{ z = 16, size = 16 }"
#define NET_SMALL_D "return require('backbones.dcgan').D{ size = 16 }"

/* test_cuda_ops's attention layer, batch 4 */
#define NET_ATTENTION "return { {'attention', 32, sn = false}, input_shape = {32, 8, 8} }"
#define NET_ATTENTION_SN "return { {'attention', 32, sn = true}, input_shape = {32, 8, 8} }"

struct test_net {
	const char *name, *code;
	int batch, classes;
};

/* (unused where only the NET_* strings are wanted) */
static const struct test_net test_nets[] __attribute__((unused)) = {
	{ "DC-GAN G", NET_DCGAN_G, 16, 0 },
	{ "DC-GAN D", NET_DCGAN_D, 16, 0 },
	{ "DC-CGAN G", NET_DCGAN_CG, 10, 10 },
	{ "DC-CGAN D", NET_DCGAN_CD, 10, 10 },
	{ "classifier", NET_CLASSIFIER, 8, 0 },
	{ "all layers", NET_ALL_LAYERS, 6, 0 },
	{ "resnet kinds", NET_RESNET_KINDS, 6, 0 },
	{ "cbn + proj", NET_CBN_PROJ, 6, 5 },
	{ "small G", NET_SMALL_G, 8, 0 },
	{ "small D", NET_SMALL_D, 8, 0 },
	{ "attention", NET_ATTENTION, 4, 0 },
	{ "attention sn", NET_ATTENTION_SN, 4, 0 },
};
#define N_TEST_NETS (sizeof(test_nets) / sizeof(test_nets[0]))

#endif
