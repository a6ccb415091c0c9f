"""drakit's container images, built offline without Docker (:mod:`clusters.images.build`)."""

from drakit.clusters.images.build import (
    BUSYBOX_REF, IMAGES, PAUSE_REF, Built, ImageBuildError, build_images, driver_ref, ensure_images, images_dir,
)

__all__ = ["BUSYBOX_REF", "IMAGES", "PAUSE_REF", "Built", "ImageBuildError", "build_images", "driver_ref",
           "ensure_images", "images_dir"]
