# find_package(baracuda CONFIG) against an installed baracuda package (the wheel ships this file in
# baracuda/cmake; `python -c "import baracuda; print(baracuda.get_cmake_dir())"` prints the folder
# to pass as baracuda_DIR or on CMAKE_PREFIX_PATH). Defines the imported target baracuda::baracuda:
# the core library (libbaracuda.so, no Python) and its C++17 headers.
get_filename_component(_baracuda_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
if(NOT TARGET baracuda::baracuda)
  add_library(baracuda::baracuda SHARED IMPORTED)
  set_target_properties(baracuda::baracuda PROPERTIES
    IMPORTED_LOCATION "${_baracuda_root}/libbaracuda.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_baracuda_root}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()
set(baracuda_INCLUDE_DIR "${_baracuda_root}/include")
set(baracuda_LIBRARY "${_baracuda_root}/libbaracuda.so")
unset(_baracuda_root)
