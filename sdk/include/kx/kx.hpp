// The C++ API of kx in one include.
#pragma once
#include "kx/applications.hpp"
#include "kx/callback.hpp"
#include "kx/dataset.hpp"
#include "kx/device.hpp"
#include "kx/error.hpp"
#include "kx/layer.hpp"
#include "kx/loss.hpp"
#include "kx/metric.hpp"
#include "kx/model.hpp"
#include "kx/optimizer.hpp"
#include "kx/strategy.hpp"
#include "kx/tensor.hpp"
