package natsconf_test

import "maintsignals/test/testenv"

var quiet = testenv.Quiet()
