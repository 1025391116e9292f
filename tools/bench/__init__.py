"""``make bench``: the solvers and trainers of ntpcore against generic references (cvxpy,
the authors' formulations); writes the Performance page's data.  Checkout only."""
