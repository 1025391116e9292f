"""geo/models"""
