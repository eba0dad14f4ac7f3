from django.apps import AppConfig


class MeshConfig(AppConfig):
    name = "mesh"
    verbose_name = "Mesh"
