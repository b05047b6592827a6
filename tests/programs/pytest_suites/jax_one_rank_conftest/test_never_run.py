def test_never_run():
    pass
