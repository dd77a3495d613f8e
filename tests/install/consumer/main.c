#include <mycoll.h>
#include <stdio.h>
int main(void) { int v = 0; if (mycollGetVersion(&v) != mycollSuccess) return 1; printf("mycoll %d\n", v); return v == MYCOLL_VERSION_CODE ? 0 : 1; }
