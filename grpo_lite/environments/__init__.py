"""Environments a policy acts in: adapters that give TRL's ``environment_factory=`` a game or a service to play."""
