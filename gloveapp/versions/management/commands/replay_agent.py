"""`python manage.py replay_agent AGENT`: run recorded conversations again against a version
of AGENT and report what changed, without touching the recording.

    replay_agent coffee --sample 20                   # against the draft
    replay_agent coffee --against 3 --ids s1,s2,s3
    replay_agent coffee --against published --filter "q=refund"   # the admin list's filter
    replay_agent coffee --sample 200 --enqueue        # on the task backend's workers
    replay_agent coffee --resume 14                   # finish a run that stopped
    replay_agent coffee --sample 20 --unseen-tools run-sandbox   # run calls never recorded

It runs in this process a batch at a time, printing progress, and ends with the run's
figures and the conversations that diverged (the admin shows the same run's report).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from gloveapp.agents.config import agent_names
from gloveapp.versions.models import AgentPointer, AgentVersion, ReplayResult, ReplayRun
from gloveapp.versions.replay import UNSEEN_MARK, UNSEEN_MODES
from gloveapp.versions.runs import replay_run_create, replay_run_execute, sample_sessions
from gloveapp.versions.selection import SelectionInvalid, parse_ids, sessions_from_admin_filter
from gloveapp.versions.tasks import replay_run_enqueue


class Command(BaseCommand):
    help = "Replay recorded conversations of AGENT against one of its versions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("agent")
        parser.add_argument(
            "--against",
            default="draft",
            help="A version number, 'draft' (the default) or 'published'.",
        )
        chosen = parser.add_mutually_exclusive_group()
        chosen.add_argument("--ids", default="", help="Session ids, comma or space separated.")
        chosen.add_argument("--sample", type=int, default=0, help="This many, at random.")
        chosen.add_argument(
            "--filter", default=None, help="A query string of the sessions' admin list."
        )
        chosen.add_argument("--resume", type=int, default=0, help="Finish the run with this id.")
        parser.add_argument("--seed", type=int, default=None, help="The sample's random seed.")
        parser.add_argument("--as", dest="username", default="", help="Who starts it.")
        parser.add_argument(
            "--enqueue", action="store_true", help="Hand it to the task backend's workers."
        )
        parser.add_argument(
            "--unseen-tools",
            choices=UNSEEN_MODES,
            default=UNSEEN_MARK,
            help="A tool call the recording never saw: 'mark' it (the default: answered "
            "with an error), or 'run-sandbox': run the tool inside a transaction that is "
            "always rolled back (its database writes on the replay's connection are undone; "
            "e-mails, HTTP calls and other connections are not).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        agent = options["agent"]
        if agent not in agent_names():
            raise CommandError(f"No agent called {agent!r} (GLOVE_AGENTS).")
        user = self._user(options["username"])
        if options["resume"]:
            run = ReplayRun.objects.filter(pk=options["resume"], version__agent_name=agent).first()
            if run is None:
                raise CommandError(f"{agent} has no replay run {options['resume']}.")
        else:
            version = self._version(agent, options["against"])
            session_ids, selection = self._selection(agent, options, user)
            try:
                run = replay_run_create(
                    version=version,
                    session_ids=session_ids,
                    selection=selection,
                    by=user,
                    unseen_tools=options["unseen_tools"],
                )
            except ValueError as error:
                raise CommandError(str(error)) from None
        if options["enqueue"]:
            replay_run_enqueue(run.pk)
            self.stdout.write(f"replay run {run.pk} queued ({run.total} conversations)")
            return
        self.stdout.write(f"replay run {run.pk}: {run.total} conversations on {run.version}")
        run = replay_run_execute(run.pk, progress=self._progress)
        self._summary(run)

    def _user(self, username: str) -> Any:
        if not username:
            return None
        user = get_user_model().objects.filter(username=username, is_staff=True).first()
        if user is None:
            raise CommandError(f"No staff member called {username!r}.")
        return user

    def _version(self, agent: str, wanted: str) -> AgentVersion:
        if wanted in ("draft", "published"):
            pointer = AgentPointer.objects.filter(agent_name=agent).first()
            version = getattr(pointer, wanted, None) if pointer else None
            if version is None:
                raise CommandError(f"{agent} has no {wanted} version (write one in the admin).")
            return version
        try:
            return AgentVersion.objects.get(agent_name=agent, number=int(wanted))
        except (ValueError, AgentVersion.DoesNotExist):
            raise CommandError(f"{agent} has no version {wanted!r}.") from None

    def _selection(self, agent: str, options: dict[str, Any], user: Any) -> tuple[list[str], str]:
        if options["ids"]:
            return parse_ids(options["ids"]), "ids"
        if options["sample"]:
            if options["sample"] < 1:
                raise CommandError("--sample takes a positive number.")
            return (
                sample_sessions(agent, options["sample"], seed=options["seed"]),
                f"sample of {options['sample']}",
            )
        if options["filter"] is not None:
            try:
                return (
                    sessions_from_admin_filter(options["filter"], user=user),
                    f"filter ?{options['filter'].lstrip('?')}",
                )
            except SelectionInvalid as error:
                raise CommandError(str(error)) from None
        raise CommandError("Choose the conversations: --ids, --sample, --filter or --resume.")

    def _progress(self, run: ReplayRun) -> None:
        self.stdout.write(f"  {run.done}/{run.total} replayed, {run.diverged} diverged")

    def _summary(self, run: ReplayRun) -> None:
        self.stdout.write(
            f"replay run {run.pk} {run.status}: {run.done} of {run.total} replayed, "
            f"{run.done - run.diverged} identical, {run.diverged} diverged, {run.failed_checks} failed a check"
        )
        diverged = ReplayResult.objects.filter(run=run, diverged=True).values_list(
            "session_id", "divergence"
        )
        for session_id, divergence in diverged[:50]:
            self.stdout.write(f"  {session_id}: {divergence}")
        if run.error:
            raise CommandError(run.error)
