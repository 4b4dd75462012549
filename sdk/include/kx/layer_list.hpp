// The one list of layers: a row per layer, X(Kind, "KerasClassName", "name_stem", reader, factory).
// LayerKind and the layer table (sdk/src/core/layers/layer_registry.cpp) are made from it, so a new
// layer is a row here (at the end: the kinds' values are their places) and its own .cpp defining the
// reader and the factory. The reader takes the layer's settings from its Keras "config" (read_no_config:
// none, or the layer reads LayerSpec::config itself); the factory checks them and makes the layer.
#pragma once

#define KX_LAYERS(X)                                                                                           \
  X(Dense, "Dense", "dense", read_dense_config, make_dense_layer)                                              \
  X(Flatten, "Flatten", "flatten", read_no_config, make_flatten_layer)                                         \
  X(Dropout, "Dropout", "dropout", read_dropout_config, make_dropout_layer)                                    \
  X(Conv2D, "Conv2D", "conv2d", read_conv2d_config, make_conv2d_layer)                                         \
  X(MaxPooling2D, "MaxPooling2D", "max_pooling2d", read_pooling2d_config, make_max_pooling2d_layer)             \
  X(AveragePooling2D, "AveragePooling2D", "average_pooling2d", read_pooling2d_config,                          \
    make_average_pooling2d_layer)                                                                              \
  X(GlobalAveragePooling2D, "GlobalAveragePooling2D", "global_average_pooling2d",                              \
    read_global_average_pooling2d_config, make_global_average_pooling2d_layer)                                 \
  X(ZeroPadding2D, "ZeroPadding2D", "zero_padding2d", read_zero_padding2d_config, make_zero_padding2d_layer)   \
  X(Normalization, "Normalization", "normalization", read_normalization_config, make_normalization_layer)      \
  X(BatchNormalization, "BatchNormalization", "batch_normalization", read_batch_normalization_config,          \
    make_batch_normalization_layer)                                                                            \
  X(Add, "Add", "add", read_no_config, make_add_layer)                                                         \
  X(Concatenate, "Concatenate", "concatenate", read_concatenate_config, make_concatenate_layer)                \
  X(Activation, "Activation", "activation", read_activation_config, make_activation_layer)                    \
  X(ReLU, "ReLU", "re_lu", read_no_config, make_relu_layer)                                                     \
  X(DepthwiseConv2D, "DepthwiseConv2D", "depthwise_conv2d", read_no_config, make_depthwise_conv2d_layer)       \
  X(Rescaling, "Rescaling", "rescaling", read_no_config, make_rescaling_layer)                                 \
  X(Reshape, "Reshape", "reshape", read_no_config, make_reshape_layer)                                         \
  X(LeakyReLU, "LeakyReLU", "leaky_re_lu", read_no_config, make_leaky_relu_layer)                              \
  X(GlobalMaxPooling2D, "GlobalMaxPooling2D", "global_max_pooling2d", read_no_config,                          \
    make_global_max_pooling2d_layer)                                                                           \
  X(LayerNormalization, "LayerNormalization", "layer_normalization", read_no_config,                          \
    make_layer_normalization_layer)                                                                            \
  X(MultiHeadAttention, "MultiHeadAttention", "multi_head_attention", read_no_config,                          \
    make_multi_head_attention_layer)                                                                           \
  X(Conv1D, "Conv1D", "conv1d", read_no_config, make_conv1d_layer)                                             \
  X(MaxPooling1D, "MaxPooling1D", "max_pooling1d", read_no_config, make_max_pooling1d_layer)                   \
  X(AveragePooling1D, "AveragePooling1D", "average_pooling1d", read_no_config, make_average_pooling1d_layer)   \
  X(GlobalAveragePooling1D, "GlobalAveragePooling1D", "global_average_pooling1d", read_no_config,              \
    make_global_average_pooling1d_layer)                                                                       \
  X(SeparableConv2D, "SeparableConv2D", "separable_conv2d", read_no_config, make_separable_conv2d_layer)       \
  X(Conv2DTranspose, "Conv2DTranspose", "conv2d_transpose", read_no_config, make_conv2d_transpose_layer)       \
  X(UpSampling2D, "UpSampling2D", "up_sampling2d", read_no_config, make_up_sampling2d_layer)                   \
  X(Multiply, "Multiply", "multiply", read_no_config, make_multiply_layer)                                     \
  X(TensorOperation, "TensorOperation", "tensor_operation", read_no_config, make_tensor_operation_layer)       \
  X(Embedding, "Embedding", "embedding", read_no_config, make_embedding_layer)                                 \
  X(LSTM, "LSTM", "lstm", read_no_config, make_lstm_layer)                                                     \
  X(GRU, "GRU", "gru", read_no_config, make_gru_layer)                                                         \
  X(Bidirectional, "Bidirectional", "bidirectional", read_no_config, make_bidirectional_layer)                \
  X(Masking, "Masking", "masking", read_no_config, make_masking_layer)
