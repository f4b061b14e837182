"""Fake IsaacGymEnvs: ``make`` proves the GMI got past Isaac Gym's import, then stops the run."""


def make(**kwargs):
    raise RuntimeError(f"fake isaacgymenvs.make reached (task={kwargs.get('task')})")
