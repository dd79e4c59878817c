"""``dofkit play``: publish a bag's messages over DDS at their recorded pace, with /clock (online replay).

Where you are: a subcommand module (argument parsing and output); the player is ``ros_dofkit.replay.player``.
Exit status 0 when the bag was played (or stopped with Ctrl-C), 1 when it cannot be played.
"""

from __future__ import annotations

import argparse
import sys

DESCRIPTION = """\
Online replay without rosbag2: publish every message of the bag IN on its topic at the pace of its bag
timestamps (times --rate), and /clock (rosgraph_msgs/Clock) with the bag time before each new instant, so that
nodes started with use_sim_time:=true (e.g. the estimator) run on the recording's time. Messages go out as
stored (serialized CDR) on reliable publishers; a /clock topic inside the bag is replaced by the player's.
Before exiting, the player waits (at most --ack-timeout s) until every subscriber has acknowledged every message,
so that none loses the bag's last messages with the exiting process.

--loop plays the bag again and again: each restart sends the clock back to the bag's first stamp, and the
estimator resets its tracking on that jump instead of mixing the passes. Example:

  dofkit record demo_bag --clock
  estimator --ros-args --params-file demo_bag.estimator.yaml -p use_sim_time:=true &
      (with a ROS 2 installation: ros2 run ros_dofkit estimator --ros-args ...)
  dofkit play demo_bag --wait-for-subscribers
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "play", help="publish a bag's messages over DDS at the recorded pace, with /clock (online replay)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", metavar="IN", help="bag to play (sqlite3 or mcap)")
    parser.add_argument("--rate", type=float, default=1.0, help="playback speed factor (default 1)")
    parser.add_argument("--loop", action="store_true", help="play again and again until Ctrl-C")
    parser.add_argument("--count", type=int, default=1, metavar="N", help="number of passes without --loop "
                        "(default 1)")
    parser.add_argument("--topics", nargs="+", metavar="TOPIC", help="play only these topics (default: all)")
    parser.add_argument("--no-clock", action="store_true", help="do not publish /clock")
    parser.add_argument("--wait-for-subscribers", nargs="*", metavar="TOPIC", default=None,
                        help="start only when these topics have a subscriber (without TOPIC: when any played topic "
                        "has one), then 1 s more for the subscribers to see the match too; at most --wait-timeout s")
    parser.add_argument("--wait-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="longest wait for subscribers (default 30)")
    parser.add_argument("--ack-timeout", type=float, default=5.0, metavar="SECONDS",
                        help="after the last message, wait at most this long for the subscribers to acknowledge "
                        "every message before exiting (default 5; 0: exit at once)")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import rclpy
    from rclpy.context import Context

    from ros_dofkit.replay.player import BagPlayer
    from ros_dofkit.ros.bag_io import BagError

    if not args.ack_timeout >= 0:
        print(f"dofkit play: error: --ack-timeout: expected a number >= 0, got {args.ack_timeout}", file=sys.stderr)
        return 2
    if args.count < 1:
        print(f"dofkit play: error: --count: expected an integer >= 1, got {args.count}", file=sys.stderr)
        return 2
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("dofkit_play", context=context)
    interactive = sys.stderr.isatty() and not args.quiet
    try:
        try:
            player = BagPlayer(node, args.input, rate=args.rate, topics=args.topics, publish_clock=not args.no_clock)
        except (BagError, ValueError) as error:
            print(f"dofkit play: error: {error}", file=sys.stderr)
            return 1
        if args.wait_for_subscribers is not None:
            try:
                player.wait_for_subscribers(args.wait_for_subscribers or None, timeout_s=args.wait_timeout)
            except (TimeoutError, BagError) as error:
                print(f"dofkit play: error: {error}", file=sys.stderr)
                return 1

        def show(text: str) -> None:
            if interactive:
                sys.stderr.write("\r\033[K" + text)
                sys.stderr.flush()

        try:
            stats = player.play(loops=None if args.loop else args.count, progress=show)
        except KeyboardInterrupt:
            print("\ndofkit play: stopped", file=sys.stderr)
            return 0
        except BagError as error:
            print(f"\ndofkit play: error: {error}", file=sys.stderr)
            return 1
        if interactive:
            sys.stderr.write("\n")
        unacknowledged = player.wait_for_acknowledgements(args.ack_timeout) if args.ack_timeout > 0 else []
        if unacknowledged:
            print(f"dofkit play: warning: messages on {unacknowledged} were not acknowledged by every subscriber "
                  f"within --ack-timeout {args.ack_timeout:g} s; a subscriber may miss the last of them",
                  file=sys.stderr)
        total = sum(stats.published.values())
        print(f"played {args.input}: {stats.passes} pass(es), {total} messages on {len(stats.published)} topics, "
              f"{stats.clock_messages} /clock messages, {stats.wall_time_s:.2f} s")
        return 0
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
