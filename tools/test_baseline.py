#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Tests of tools/baseline.py's keys: which changes make which tests stale.

Run by make check's host stage (python3 -m unittest); each test works on a copy of
selftests/ in a temporary directory.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.abspath(__file__))
SELFTESTS = os.path.join(TOOLS, "..", "selftests")


class Keys(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.tests = os.path.join(self.dir, "selftests")
        shutil.copytree(SELFTESTS, self.tests)
        self.baseline = os.path.join(self.dir, "baseline.txt")
        self.setUp_record()

    def setUp_record(self):
        """One recorded run in which every test passed."""
        tap = os.path.join(self.dir, "run.tap")
        with open(tap, "w") as f:
            for i, (t, _) in enumerate(sorted(self.keys().items())):
                f.write("ok %d %s\n" % (i + 1, t))
        self.baseline_py("record", self.baseline, tap)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def baseline_py(self, *args, env="env"):
        return subprocess.run(
            ["python3", os.path.join(TOOLS, "baseline.py"), args[0], "--env", env] + list(args[1:]),
            env=dict(os.environ, RXE_RS_SELFTESTS=self.tests), capture_output=True, text=True,
            check=True).stdout

    def keys(self):
        return dict(l.split() for l in self.baseline_py("keys").splitlines())

    def stale(self, env="env"):
        return set(self.baseline_py("stale", self.baseline, env=env).split())

    def edit(self, name, old, new):
        path = os.path.join(self.tests, name)
        with open(path) as f:
            text = f.read()
        self.assertIn(old, text)
        with open(path, "w") as f:
            f.write(text.replace(old, new, 1))

    def users_of(self, word):
        """The tests whose function's text names WORD (directly)."""
        with open(os.path.join(self.tests, "guest-tests.sh")) as f:
            text = f.read()
        # A test's function to the first line that ends with a brace: enough for the
        # one-line functions these tests look at.
        funcs = dict(re.findall(r"^(t_\w+)\(\) \{(.*?)\}$", text, re.M | re.S))
        return {t for t, fn in re.findall(r"^run (\S+) (\S+)$", text, re.M)
                if re.search(r"\b%s\b" % word, funcs.get(fn, ""))}

    def test_nothing_changed(self):
        self.assertEqual(self.stale(), set())
        outcomes = dict(l.split() for l in self.baseline_py("outcomes", self.baseline).splitlines())
        self.assertEqual(set(outcomes.values()), {"ok"})
        self.assertEqual(len(outcomes), len(self.keys()))

    def test_one_test_changed(self):
        self.edit("guest-tests.sh", "t_create_cq() { with_dev && \"$VB\" \"$DEV\" create_cq; }",
                  "t_create_cq() { with_dev && \"$VB\" \"$DEV\" create_cq && true; }")
        self.assertEqual(self.stale(), {"create_cq"})

    def test_comment_changes_nothing(self):
        self.edit("guest-tests.sh", "# run NAME FUNCTION:", "# run NAME FUNCTION (edited):")
        self.assertEqual(self.stale(), set())

    def test_helper_changed(self):
        # A helper that some tests call: those, and only those, are stale.
        self.edit("guest-tests.sh", "dt() {\n\tlocal drc\n", "dt() {\n\tlocal drc x\n")
        self.assertEqual(self.stale(), {"qp_destroy_under_traffic", "srq_qp_destroy_under_traffic"})

    def test_program_changed(self):
        # verbs_objects.c is run through $VO by `vo` and a few tests of their own.
        with open(os.path.join(self.tests, "verbs_objects.c"), "a") as f:
            f.write("/* edited */\n")
        stale = self.stale()
        self.assertTrue(self.users_of("vo") <= stale)
        self.assertNotIn("create_cq", stale)  # verbs_basic's
        self.assertNotIn("link_add", stale)

    def test_imported_script_changed(self):
        # peer_qps.py imports live_qps.py: the tests that run either are stale.
        with open(os.path.join(self.tests, "live_qps.py"), "a") as f:
            f.write("# edited\n")
        stale = self.stale()
        self.assertIn("hostile_packets_to_live_qps", stale)
        self.assertIn("forged_responses_unsent_psns", stale)  # a peer_qps.py test
        self.assertNotIn("create_cq", stale)

    def test_module_source_changed(self):
        # kverbs_test.ko, named by its stem, is built from selftests/kverbs/.
        with open(os.path.join(self.tests, "kverbs", "kverbs_test.c"), "a") as f:
            f.write("/* edited */\n")
        stale = self.stale()
        self.assertIn("isolation_ud_kernel_consumer_ah", stale)
        self.assertIn("kernel_consumer_verbs", stale)
        self.assertNotIn("create_cq", stale)

    def test_outside_source_changed(self):
        # The sample driver is built from samples/ and rust/, outside selftests/.
        src = os.path.join(self.dir, "rust", "lib.rs")
        os.makedirs(os.path.dirname(src))
        with open(src, "w") as f:
            f.write("// one\n")
        self.setUp_record()
        with open(src, "w") as f:
            f.write("// two\n")
        self.assertEqual(self.stale(), {"minimal_sample_driver"})

    def test_test_moved_past_load(self):
        # A test moved from before the driver's loading to after it: only it is stale.
        self.edit("guest-tests.sh", "run minimal_sample_driver t_minimal_sample\n", "")
        self.edit("guest-tests.sh", "run link_add t_link_add\n",
                  "run link_add t_link_add\nrun minimal_sample_driver t_minimal_sample\n")
        self.assertEqual(self.stale(), {"minimal_sample_driver"})

    def test_harness_changed(self):
        self.edit("guest-tests.sh", "\tdel_all >/dev/null 2>&1\n", "\tdel_all >/dev/null 2>&1 || :\n")
        self.assertEqual(self.stale(), set(self.keys()))

    def test_environment_changed(self):
        self.assertEqual(self.stale(env="another kernel"), set(self.keys()))

    def test_flaky(self):
        tap = os.path.join(self.dir, "two.tap")
        with open(tap, "w") as f:
            f.write("ok 1 link_add\nnot ok 2 create_cq\n")
        tap2 = os.path.join(self.dir, "three.tap")
        with open(tap2, "w") as f:
            f.write("ok 1 link_add\nok 2 create_cq\n")
        self.baseline_py("record", self.baseline, tap, tap2)
        outcomes = dict(l.split() for l in self.baseline_py("outcomes", self.baseline).splitlines())
        self.assertEqual(outcomes["create_cq"], "flaky")
        self.assertEqual(outcomes["link_add"], "ok")


if __name__ == "__main__":
    unittest.main()
