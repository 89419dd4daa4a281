// The model's layers (layers.h).
#include "planner/layers.h"

#include <map>
#include <string>
#include <tuple>

#include "config/layer_kinds.h"

namespace popkit::planner {

std::vector<LayerInfo> model_layers(const config::Model& model) {
  config::SampleShape in{1, 1};
  for (const std::int64_t d : model.input_shape) in.width *= d;
  std::map<std::tuple<std::string, std::int64_t, std::int64_t, config::Attributes>, int> graph_of;
  std::vector<int> rows;  // per graph, the rows handed out
  std::vector<LayerInfo> out;
  for (const config::Layer& l : model.layers) {
    LayerInfo info;
    info.name = l.name;
    info.kind = l.type;
    info.attributes = l.attributes;
    info.in_features = in.width;
    const config::SampleShape shape = config::layer_kind_rules(l.type).out_shape(l.attributes, in);
    info.out_features = shape.width;
    info.sequence = shape.positions;
    const auto [it, added] =
        graph_of.emplace(std::make_tuple(info.kind, in.width, in.positions, info.attributes),
                         static_cast<int>(rows.size()));
    if (added) rows.push_back(0);
    info.graph = it->second;
    info.row = rows[static_cast<std::size_t>(info.graph)]++;
    in = shape;
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace popkit::planner
