"""A valid POST of the new-experiment form, for tests to break one field at a time."""


def experiment_post(**changes) -> dict:
    data = {
        "name": "FrozenLake sweep",
        "description": "",
        "env": "frozenlake",
        "env__frozenlake__size": "4",
        "env__frozenlake__frozen_prob": "0.8",
        "env__frozenlake__slippery": "on",
        "env__frozenlake__map": "",
        "model": "tiny",
        "preset": "starpo-s",
        "steps": "20",
        "seeds": "1",
        "grid": "",
        "overrides": "",
        "detector_overrides": "",
        "alert_recipients": "",
    }
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}
