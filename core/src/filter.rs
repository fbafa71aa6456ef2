//! Which file paths are traced (`DFTRACER_DATA_DIR`). Owned by the preload work; see
//! `frontends/preload`.
