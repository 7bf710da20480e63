"""sglang_patch"""
