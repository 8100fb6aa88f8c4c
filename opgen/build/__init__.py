"""`opgen build`: the ninja plan, the toolchain it finds, the build stamp."""
