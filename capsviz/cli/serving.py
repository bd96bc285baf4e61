"""capsviz app: the Streamlit app started from any folder, alone or as a class's replicas."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from capsviz.cli.arguments import integer
from capsviz.errors import CapsvizError
from capsviz.i18n import t


def add_app(sub) -> None:
    """`app` and its options (the rest go to Streamlit)."""
    a = sub.add_parser(
        "app",
        help=t("start the Streamlit app (other options go to Streamlit: --server.port 8502, --server.address 0.0.0.0)"),
        description=t(
            "Start the app from any folder. Options not listed here go to `streamlit run` unchanged, "
            "e.g. --server.address 0.0.0.0 to serve a class, --server.port 8502."
        ),
    )
    a.add_argument(
        "--checkpoints",
        type=Path,
        help=t(
            "the models to show and where the Train page saves "
            "(default: $CAPSVIZ_CHECKPOINTS, checkpoints/ in a checkout, else the user folder that `capsviz doctor` prints)"
        ),
    )
    a.add_argument(
        "--replicas",
        type=integer(1),
        nargs="?",
        const=0,
        metavar="N",
        help=t("serve a class: N app processes behind nginx, one per core without N (needs nginx; capsviz/serve.py)"),
    )


def cmd_app(args) -> int:
    import subprocess

    from capsviz import access

    access.check_teacher_key()  # a key a student could guess: refused before anything starts
    if args.replicas is not None:
        from capsviz import serve

        serve.nginx_binary()  # missing: say so before anything else
        args.replicas = serve.replicas_for(args.replicas)  # more than the machine can run: likewise
        command, env = app_command(args.checkpoints, serve.split_address(args.streamlit_args)[2])
    else:
        command, env = app_command(args.checkpoints, args.streamlit_args)
    print(
        t("capsviz: native EM kernel {status}", status=build_kernel()), file=sys.stderr
    )  # before the first student, not during their first page
    access.announce(Path(env["CAPSVIZ_CHECKPOINTS"]))  # the teacher key, in the host's terminal before any student arrives
    if args.replicas is not None:
        return serve.serve(command, env, args.replicas, args.streamlit_args)
    if os.name == "posix":  # become Streamlit: signals (Ctrl-C, a service manager's SIGTERM) reach it directly
        sys.stderr.flush()
        os.execve(sys.executable, command, env)
    try:
        return subprocess.call(command, env=env)
    except KeyboardInterrupt:  # Ctrl-C reaches Streamlit too, which stops on its own
        return 0


def app_command(checkpoints: Path | None, streamlit_args: list[str]) -> tuple[list[str], dict[str, str]]:
    """`streamlit run` of the app, wherever capsviz is, and its environment."""
    import tomllib

    from capsviz import paths

    env = dict(os.environ)
    if checkpoints and not checkpoints.is_dir():
        raise CapsvizError(t("--checkpoints {folder}: no such folder", folder=checkpoints))
    folder = checkpoints or paths.model_folder()
    env["CAPSVIZ_CHECKPOINTS"] = str(folder)
    # The app's Streamlit settings (.streamlit/config.toml) are only read from the folder Streamlit
    # starts in: pass them as environment variables, which the user's own flags still override.
    config = paths.app_dir() / ".streamlit" / "config.toml"
    if config.is_file():
        for section, options in tomllib.loads(config.read_text()).items():
            for key, value in options.items():
                snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)  # postScriptGC -> post_Script_GC, as Streamlit names it
                name = f"STREAMLIT_{section}_{snake}".upper()
                env.setdefault(name, str(value).lower() if isinstance(value, bool) else str(value))
    return [sys.executable, "-m", "streamlit", "run", str(paths.app_dir() / "app.py"), *streamlit_args], env


def build_kernel() -> str:
    """Build (or find built) the native EM kernel; its status in words. Concurrent builds by other
    processes wait for one another (capsviz.kernels.native)."""
    from capsviz.kernels import native

    native.available()
    return native.status()
