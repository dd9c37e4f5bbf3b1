BweightJ
h?,?R>„>î>