"""Engine-free types shared by policies, the simulator and the SGLang plugin."""
