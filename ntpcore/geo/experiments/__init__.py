"""geo/experiments"""
