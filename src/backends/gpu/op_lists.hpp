// How a GPU plugin fills its solver lists: each <op>_list.cpp of the cuda or hip backend adds its
// registrar from a static initialiser, and the plugin's entry point runs them all once its
// backend is registered, so a new op's list needs no edit outside its own file.
#pragma once

namespace galley::backends::gpu {

using ListRegistrar = void (*)();

/// Called from a static initialiser of a list file; returns true.
bool add_list_registrar(ListRegistrar registrar);
/// Runs every registrar added so far (the plugin's galley_plugin_register).
void register_op_lists();

}  // namespace galley::backends::gpu
