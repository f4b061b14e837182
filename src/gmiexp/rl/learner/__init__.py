"""The learner of the experience layouts: one GAE, one update loop for PPO and A2C, the learning-rate schedule."""
