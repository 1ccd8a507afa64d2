//! The Nodes view: the nodes of the fleet with open panes, or of the selected fleet
//! (a GKE fleet's pools, nodes and Kueue workloads).

pub mod view;
