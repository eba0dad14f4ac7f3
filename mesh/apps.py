from django.apps import AppConfig


class MeshConfig(AppConfig):
    name = "mesh"
    verbose_name = "Mesh"

    def ready(self) -> None:
        from mesh import checks  # noqa: F401  (registers the system checks)
