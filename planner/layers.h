// The model's layers as the planner places them (plan.h's LayerInfo): each layer's kind
// and attributes, the width of a sample's input and output, and the graph it shares with
// the layers identical to it. The builder, the tuner and the tests read layers from here.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.h"
#include "planner/plan.h"

namespace popkit::planner {

// The layers of a validated model, in order. Identical layers (same kind, input width
// and attributes: every key a kind declares takes part, so two layers that differ in any
// key never share) share one graph, numbered in order of first appearance; each holds
// one row of the graph's buffers.
std::vector<LayerInfo> model_layers(const config::Model& model);

}  // namespace popkit::planner
