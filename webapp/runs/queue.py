"""Where a queued run stands: its rank among all queued runs (every user's) in the order workers take
them (RunQuerySet.in_queue_order: by when each joined the queue; Run.next_in_queue)."""

from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from webapp.experiments.models import Run

# How long a worker's CUDA device, recorded on the runs it trained, counts as "there are GPUs here".
GPU_SEEN_FOR = timedelta(days=7)
MAX_LISTED = 5  # own runs ahead listed by name


def positions(run_ids) -> dict[int, int]:
    """{run id: place in the queue, 1 = next to start} for those of run_ids that are queued."""
    ids = set(run_ids)
    if not ids:
        return {}
    ranked = (
        Run.objects.in_queue_order()
        .annotate(place=Window(RowNumber(), order_by=[F(field).asc() for field in Run.QUEUE_ORDER]))
        .values_list("id", "place")
    )
    return {pk: place for pk, place in ranked if pk in ids}


def gpus_seen() -> bool:
    """Whether a worker trained on a CUDA device lately: the queue then waits for "a GPU", otherwise
    for "a free worker" (a CPU-only install must not promise GPUs)."""
    since = timezone.now() - GPU_SEEN_FOR
    return Run.objects.filter(device__startswith="cuda", heartbeat_at__gte=since).exists()


def waits_for() -> str:
    return "a GPU" if gpus_seen() else "a free worker"


@dataclass
class QueuePlace:
    position: int
    ahead: int  # queued runs that start before it, anyone's
    mine_ahead: list = field(default_factory=list)  # the viewer's own runs among them (first MAX_LISTED)
    mine_ahead_count: int = 0
    running: int = 0  # runs EchoLab's workers train now, anyone's (not those an MLflow client logs)
    waits_for: str = "a free worker"

    @property
    def others_ahead(self) -> int:
        return self.ahead - self.mine_ahead_count


def place(run: Run, viewer) -> QueuePlace | None:
    """Where `run` stands, as its owner `viewer` may see it: other users' runs ahead are only counted."""
    if run.status != Run.Status.QUEUED:
        return None
    position = positions([run.pk]).get(run.pk)
    if position is None:  # it left the queue meanwhile
        return None
    ahead = list(Run.objects.in_queue_order().values_list("id", flat=True)[: position - 1])
    mine = Run.objects.in_queue_order().filter(pk__in=ahead).for_user(viewer).select_related("experiment")
    return QueuePlace(
        position=position,
        ahead=len(ahead),
        mine_ahead=list(mine[:MAX_LISTED]),
        mine_ahead_count=mine.count(),
        running=Run.objects.filter(status=Run.Status.RUNNING, experiment__imported=False).count(),
        waits_for=waits_for(),
    )
